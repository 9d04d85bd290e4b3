module ifo.local/promtool

go 1.26

require github.com/prometheus/prometheus v0.310.0

replace cloud.google.com/go => cloud.google.com/go v0.123.0
