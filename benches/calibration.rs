//! How well the expected ends are calibrated: operations of known durations replayed through
//! the learner and the coverage tracker on a simulated clock (`ifo::history::replay`), as the
//! tests of docs/api.md replay them, over more seeds. Prints, per shape, the share of ends the
//! median and the p90 band held on a stable rule, how often a rule whose estimates are right
//! reads as unreliable, and, with operations twice as slow from half-way, how low the published
//! p90 coverage fell and how many ends it took to be back inside 85–95 %.
//!
//! `cargo bench --bench calibration` (`-- --seeds 100` for more)

use ifo::history::ENDS_WINDOW;
use ifo::history::replay::{BAND, Replay, Shape, replay};

const SHAPES: [(&str, Shape); 2] = [
    (
        "log-normal (median 60 s, σ 0.5)",
        Shape::LogNormal {
            median: 60.0,
            sigma: 0.5,
        },
    ),
    (
        "bimodal (70 % ~30 s, 30 % ~300 s, σ 0.3)",
        Shape::Bimodal {
            fast: 30.0,
            slow: 300.0,
            sigma: 0.3,
            slow_share: 0.3,
        },
    ),
];

/// Operations per replay; the shift at half-way.
const OPERATIONS: usize = 2000;

fn range(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    (values[0], median, values[values.len() - 1])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seeds: u64 = args
        .iter()
        .position(|a| a == "--seeds")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(30);
    println!("{seeds} seeds, {OPERATIONS} operations per replay\n");
    println!(
        "| shape | p50 held (min / median / max) | p90 held | window < 80 % | lowest after 2× | ends to recover (median / max) | p90 held after |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, shape) in SHAPES {
        let (mut p50, mut p90, mut lowest, mut after) = (vec![], vec![], vec![], vec![]);
        let (mut flagged, mut warm) = (0usize, 0usize);
        let mut recovered = vec![];
        let mut never = 0;
        for seed in 1..=seeds {
            let stable = replay(&Replay {
                shape,
                operations: OPERATIONS,
                slower_from: None,
                seed,
            });
            p50.push(stable.p50);
            p90.push(stable.p90);
            let series = &stable.series[2 * ENDS_WINDOW..];
            warm += series.len();
            flagged += series.iter().filter(|&&x| x < 0.8).count();
            let shifted = replay(&Replay {
                shape,
                operations: OPERATIONS,
                slower_from: Some((OPERATIONS / 2, 2.0)),
                seed,
            });
            lowest.push(shifted.lowest_after_shift().unwrap_or(f64::NAN));
            match shifted.recovered_after() {
                Some(n) => {
                    recovered.push(n as f64);
                    after.push(shifted.p90_from(shifted.shift.unwrap_or(0) + n));
                }
                None => never += 1,
            }
        }
        let pct = |(lo, mid, hi): (f64, f64, f64)| {
            format!(
                "{:.1} / {:.1} / {:.1} %",
                lo * 100.0,
                mid * 100.0,
                hi * 100.0
            )
        };
        let (_, rec_median, rec_max) = range(recovered);
        let (low_min, low_median, _) = range(lowest);
        println!(
            "| {name} | {} | {} | {:.2} % | {:.2} (median {:.2}) | {rec_median:.0} / {rec_max:.0}{} | {} |",
            pct(range(p50)),
            pct(range(p90)),
            flagged as f64 * 100.0 / warm.max(1) as f64,
            low_min,
            low_median,
            if never > 0 {
                format!(" ({never} never)")
            } else {
                String::new()
            },
            pct(range(after)),
        );
    }
    println!(
        "\nband: {:.0}–{:.0} %; the window figures are of the last {ENDS_WINDOW} ends, counted from the {}th judged end on",
        BAND.0 * 100.0,
        BAND.1 * 100.0,
        2 * ENDS_WINDOW
    );
}
