//! SYN: synthetic pipelines, source → N operators → sink, each operator with a CPU cost per tuple
//! and a selectivity (Haren / Lachesis §SYN).

use moirai_engine::{BuildError, BuiltQuery, Operator, Output, Query, Source, Tuple};

use crate::cost::Spin;

/// Parameters of a SYN run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SynConfig {
    /// Independent queries.
    pub queries: usize,
    /// Operators between source and sink, per query.
    pub ops: usize,
    /// CPU time per tuple and operator, ns.
    pub cost_ns: u64,
    /// Output tuples per input tuple of each operator (a probability when ≤ 1).
    pub selectivity: f64,
    /// Offered rate per query, tuples/s; 0 = as fast as possible.
    pub rate: f64,
    /// Seed of the selectivity draws.
    pub seed: u64,
}

/// The SYN operator: spins for its cost, then passes the tuple on with its selectivity.
pub struct SynOperator {
    spin: Spin,
    selectivity: f64,
    rng: fastrand::Rng,
}

impl SynOperator {
    /// An operator with cost `cost_ns` and `selectivity`.
    pub fn new(cost_ns: u64, selectivity: f64, seed: u64) -> Self {
        SynOperator { spin: Spin::new(cost_ns), selectivity, rng: fastrand::Rng::with_seed(seed) }
    }
}

impl Operator<u64, u64> for SynOperator {
    #[inline]
    fn process(&mut self, t: Tuple<u64>, out: &mut Output<'_, u64>) {
        self.spin.run(t.data);
        if self.selectivity == 1.0 {
            out.emit(t);
            return;
        }
        let mut copies = self.selectivity.floor() as u64;
        if self.rng.f64() < self.selectivity.fract() {
            copies += 1;
        }
        for _ in 0..copies {
            out.emit(t.clone());
        }
    }
}

/// Builds the SYN queries `syn0`, `syn1`, ...: `source → op1 … opN → sink`, one instance each.
pub fn queries(config: &SynConfig) -> Result<Vec<BuiltQuery>, BuildError> {
    if !(config.selectivity.is_finite() && config.selectivity >= 0.0) {
        return Err(BuildError::Config(format!("selectivity {} must be a finite number >= 0", config.selectivity)));
    }
    (0..config.queries)
        .map(|q| {
            let query = Query::new(&format!("syn{q}"));
            let mut stream = query.source("source", Source::new(|_, _| 0u64..).rate(config.rate));
            for op in 1..=config.ops {
                let (cost, sel, seed) =
                    (config.cost_ns, config.selectivity, config.seed ^ ((q as u64) << 32) ^ op as u64);
                stream = stream.process(&format!("op{op}"), move |i| SynOperator::new(cost, sel, seed ^ i as u64));
            }
            stream.discard("sink");
            query.build()
        })
        .collect()
}
