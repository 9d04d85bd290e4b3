//! How well the expected ends are calibrated: operations of known durations replayed through
//! the learner and the coverage tracker on a simulated clock (`ifo::history::replay`), as the
//! tests of docs/api.md replay them, over more seeds. Prints, per shape, the share of ends the
//! median and the p90 band held on a stable rule, how often a rule whose estimates are right
//! reads as unreliable, and, with operations twice as slow from half-way, how low the published
//! p90 coverage fell and how many ends it took to be back inside 85–95 %.
//!
//! Then, by number of durations: the share of ends the p90 band holds when its rule has n
//! durations (the band of the n before each end, as the server computes it), for real-shaped
//! traces — heavy-tailed, bimodal, a step change, a 3-hour job beside a 5-second one in one
//! rule — at the n a rare operation has (5–20) and a frequent one (100).
//!
//! `cargo bench --bench calibration` (`-- --seeds 100` for more)

use ifo::history::replay::{BAND, Replay, Shape, coverage_at, replay};
use ifo::history::{ENDS_WINDOW, MIN_SAMPLES};

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
    by_number_of_durations(seeds);
}

/// Ends judged per (trace, n) and seed.
const ENDS: usize = 20_000;

/// The numbers of durations of the second table: the server promises from [`MIN_SAMPLES`].
const NS: [usize; 6] = [5, 6, 8, 10, 20, 100];

/// A trace of the second table.
struct Trace {
    name: &'static str,
    shape: Shape,
    /// From which end on, and by what factor, durations are longer.
    step: Option<(usize, f64)>,
    /// A second row: its name, and which ends it counts.
    marked: Option<(&'static str, Counts)>,
}

/// Whether a second row counts an end, by its index, n and its duration in seconds.
type Counts = fn(usize, usize, f64) -> bool;

/// The second table (see the module): the median over `seeds` of the share held, and of the
/// ends a trace's second row counts.
fn by_number_of_durations(seeds: u64) {
    let log_normal = SHAPES[0].1;
    let traces = [
        Trace {
            name: SHAPES[0].0,
            shape: log_normal,
            step: None,
            marked: None,
        },
        Trace {
            name: "heavy-tailed (Pareto, ≥ 20 s, α 1.5)",
            shape: Shape::Pareto {
                scale: 20.0,
                alpha: 1.5,
            },
            step: None,
            marked: None,
        },
        Trace {
            name: SHAPES[1].0,
            shape: SHAPES[1].1,
            step: None,
            marked: None,
        },
        Trace {
            name: "step: the log-normal twice as slow from the middle on",
            shape: log_normal,
            step: Some((ENDS / 2, 2.0)),
            marked: Some(("… of the n ends after the step", |i, n, _| {
                (ENDS / 2..ENDS / 2 + n).contains(&i)
            })),
        },
        Trace {
            name: "a 3 h job beside a 5 s one, one rule (1 end in 24 the 3 h one's)",
            shape: Shape::Bimodal {
                fast: 5.0,
                slow: 3.0 * 3600.0,
                sigma: 0.2,
                slow_share: 1.0 / 24.0,
            },
            step: None,
            marked: Some(("… of the 3 h job's ends", |_, _, took| took > 3600.0)),
        },
    ];
    println!(
        "\nBy number of durations: the share of ends the p90 band of the n durations before each held \
         ({ENDS} ends, median of {seeds} seeds; the server promises from {MIN_SAMPLES}; the order \
         statistic promises n/(n+1) below 9, ⌈0.9(n+1)⌉/(n+1) from there)\n"
    );
    print!("| trace |");
    for n in NS {
        print!(" n = {n} |");
    }
    println!();
    println!("|---|{}", "---|".repeat(NS.len()));
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for trace in traces {
        use std::fmt::Write as _;
        let mut row = format!("| {} |", trace.name);
        let mut second = trace.marked.map(|(name, _)| format!("| {name} |"));
        for n in NS {
            let runs: Vec<(f64, Option<f64>)> = (1..=seeds)
                .map(|seed| {
                    let marked = |i, took| trace.marked.is_some_and(|(_, m)| m(i, n, took));
                    coverage_at(trace.shape, n, ENDS, trace.step, marked, seed)
                })
                .collect();
            let held = median(runs.iter().map(|r| r.0).collect());
            let _ = write!(row, " {:.1} % |", held * 100.0);
            if let Some(second) = &mut second {
                let held = median(runs.iter().filter_map(|r| r.1).collect());
                let _ = write!(second, " {:.1} % |", held * 100.0);
            }
        }
        println!("{row}");
        if let Some(second) = second {
            println!("{second}");
        }
    }
}
