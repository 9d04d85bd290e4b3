// The reference for tests/cron_differential.rs: reads "schedule<TAB>timeZone<TAB>unixSeconds<TAB>n"
// lines and prints, for each, the next n runs after that time as kube-controller-manager's
// CronJob controller finds them (github.com/robfig/cron/v3 at the version Kubernetes pins,
// ParseStandard, spec.timeZone given as the TZ= prefix the controller adds), as unix seconds
// separated by spaces, or "error" when the schedule is not read.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		f := strings.Split(in.Text(), "\t")
		if len(f) != 4 {
			fmt.Fprintln(out, "error")
			continue
		}
		schedule := f[0]
		if f[1] != "" {
			schedule = "TZ=" + f[1] + " " + schedule
		}
		start, err1 := strconv.ParseInt(f[2], 10, 64)
		n, err2 := strconv.Atoi(f[3])
		s, err := cron.ParseStandard(schedule)
		if err != nil || err1 != nil || err2 != nil {
			fmt.Fprintln(out, "error")
			continue
		}
		t := time.Unix(start, 0).UTC()
		runs := make([]string, 0, n)
		for i := 0; i < n; i++ {
			t = s.Next(t)
			if t.IsZero() {
				break
			}
			runs = append(runs, strconv.FormatInt(t.Unix(), 10))
		}
		fmt.Fprintln(out, strings.Join(runs, " "))
	}
}
