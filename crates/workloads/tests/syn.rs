//! SYN end to end: every operator passes on the share of tuples its drawn selectivity says, in
//! the simple and in the Lachesis form (with blocking operators and costly sinks).

use std::time::Duration;

use moirai_engine::{Engine, EngineConfig, RunTotals};
use moirai_workloads::syn::{self, SynConfig};

/// Runs SYN unchained (so each operator is its own physical operator with its own counts) for
/// `run`, then stops it and lets it drain.
fn run(config: &SynConfig, run: Duration) -> RunTotals {
    let queries = syn::queries(config).expect("a valid configuration");
    let engine = Engine::start(EngineConfig { chaining: false, ..EngineConfig::default() }, queries).unwrap();
    std::thread::sleep(run);
    engine.stop();
    engine.wait().expect("the run succeeds")
}

/// Asserts that each operator's observed selectivity (out / in) is its drawn one within 5
/// standard deviations of a binomial draw (a band of at least 1 %).
fn assert_selectivities(config: &SynConfig, summary: &RunTotals) {
    let params = syn::draw(config).unwrap();
    let mut checked = 0;
    for (q, query) in params.iter().enumerate() {
        for (i, op) in query.operators.iter().enumerate() {
            let name = format!("op{} (1/1)", i + 1);
            let snapshot = summary
                .operators
                .iter()
                .find(|o| o.query == format!("syn{q}") && o.name == name)
                .unwrap_or_else(|| panic!("syn{q} has no operator '{name}'"));
            let n = snapshot.tuples_in as f64;
            if n < 1_000.0 {
                continue;
            }
            let (p, observed) = (op.selectivity.min(1.0), snapshot.tuples_out as f64 / n);
            let band = (5.0 * (p * (1.0 - p) / n).sqrt()).max(0.01);
            assert!(
                (observed - op.selectivity).abs() <= band,
                "syn{q} {name}: observed {observed}, drawn {}",
                op.selectivity
            );
            checked += 1;
        }
        let sink = summary.operators.iter().find(|o| o.query == format!("syn{q}") && o.name == "sink (1/1)").unwrap();
        assert!(sink.tuples_in > 0, "syn{q}'s sink got no tuples");
    }
    assert!(checked * 2 >= params.len() * config.ops, "only {checked} operators saw 1000 tuples");
}

#[test]
fn operators_pass_on_their_drawn_share_of_tuples() {
    let simple = SynConfig { queries: 2, ops: 3, selectivity: 0.6, ..SynConfig::default() };
    assert_selectivities(&simple, &run(&simple, Duration::from_millis(300)));

    // The Lachesis form, smaller: 4 queries, cheap operators, every operator blocking now and then.
    let lachesis = SynConfig {
        queries: 4,
        cost_ns: 200,
        selectivity: 0.2,
        rate: 0.0,
        blocking: true,
        blocking_share: 1.0,
        block_probability: 0.001,
        block_max_ms: 2,
        ..SynConfig::lachesis()
    };
    assert_selectivities(&lachesis, &run(&lachesis, Duration::from_millis(1500)));
}

#[test]
fn copies_beyond_one_are_emitted_when_asked() {
    let config = SynConfig { queries: 1, ops: 1, selectivity: 2.5, ..SynConfig::default() };
    let summary = run(&config, Duration::from_millis(200));
    let op = summary.operators.iter().find(|o| o.name == "op1 (1/1)").unwrap();
    let observed = op.tuples_out as f64 / op.tuples_in as f64;
    assert!(op.tuples_in > 1_000 && (observed - 2.5).abs() < 0.05, "{} in, {} out", op.tuples_in, op.tuples_out);
}
