//! SYN: synthetic pipelines, source → K operators → sink, each operator with a CPU cost per tuple
//! and a selectivity (Haren / Lachesis §SYN; `reference/workloads.md` §5).
//!
//! Two forms share one [`SynConfig`]:
//!
//! - the **simple** form ([`SynConfig::default`], what `moirai run syn` starts): every operator of
//!   every query has cost `cost_ns` and selectivity `selectivity`;
//! - the **Haren/Lachesis** form ([`SynConfig::lachesis`], 20 queries × 3 operators): each query
//!   draws its cost as `cost_ns · 2^U{0..=variance_factor}` and its selectivity uniformly in
//!   `[selectivity^(1/ops), 1]` (so no query's end-to-end selectivity falls below `selectivity`);
//!   each operator then varies both by ±`operator_variance` (uniform), and the sink burns an
//!   operator's cost too, as Liebre's `SyntheticStressSink` did. Optionally a share of operators
//!   *block*: per tuple, with probability `block_probability`, they sleep `U[0, block_max_ms)` —
//!   a real `thread::sleep`, so the thread leaves the CPU as it would waiting for I/O.
//!
//! All draws come from one generator seeded with `seed`, consumed in a fixed order, so a seed
//! names one set of queries ([`draw`] returns it, for reports and tests).

use std::time::Duration;

use moirai_engine::{BuildError, BuiltQuery, Operator, Output, Query, Source, Tuple};

use crate::cost::Spin;

/// Parameters of a SYN run. [`Default`] is the simple form, [`SynConfig::lachesis`] the form of
/// the Lachesis evaluation.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SynConfig {
    /// Independent queries.
    pub queries: usize,
    /// Operators between source and sink, per query.
    pub ops: usize,
    /// CPU time per tuple and operator, ns: the base cost of a query.
    pub cost_ns: u64,
    /// Simple form: output tuples per input tuple of each operator (a probability when ≤ 1,
    /// copies beyond 1). With `draw_selectivity`: the lowest end-to-end selectivity of a query.
    pub selectivity: f64,
    /// Offered rate per query, tuples/s; 0 = as fast as possible.
    pub rate: f64,
    /// Instances of each query's source, operators and sink (data parallelism): instance *i* of
    /// the source sends its share of the query's rate to instance *i* of each operator (forward
    /// edges), and the sinks' latencies are merged.
    pub parallelism: usize,
    /// Seed of all draws (query and operator parameters, per-tuple selectivity and blocking).
    pub seed: u64,
    /// A query's cost is `cost_ns · 2^U{0..=variance_factor}`; 0 = every query costs `cost_ns`.
    pub variance_factor: u32,
    /// Each operator's cost and selectivity are its query's ± this share, uniformly (0.1 = ±10 %);
    /// 0 = all operators of a query are alike.
    pub operator_variance: f64,
    /// Draw each query's operator selectivity uniformly in `[selectivity^(1/ops), 1]` (Haren)
    /// instead of using `selectivity` for every operator.
    pub draw_selectivity: bool,
    /// Keep drawn operator selectivities above 1 (operators then emit extra copies); otherwise
    /// they are clamped to 1, as a filter that passes every tuple. A configured `selectivity`
    /// above 1 is always kept: that is asking for it.
    pub selectivity_above_one: bool,
    /// Make a share (`blocking_share`) of the operators block now and then.
    pub blocking: bool,
    /// Share of operators that block, when `blocking` (0.1 in Lachesis' `ChainBlocking`).
    pub blocking_share: f64,
    /// Probability per tuple that a blocking operator sleeps (0.001 in Lachesis).
    pub block_probability: f64,
    /// A blocking operator sleeps `U[0, block_max_ms)` ms (200 in Lachesis).
    pub block_max_ms: u64,
    /// The sink burns an operator's cost per tuple too (as Liebre's SYN sink did).
    pub sink_cost: bool,
    /// `(k, factor)`: operator k (from 1) of every query costs `factor` times its drawn cost — one
    /// heavier operator in the pipeline, the bottleneck a scheduler has to find.
    pub heavy: Option<(usize, u64)>,
}

impl Default for SynConfig {
    /// The simple form: one query of 5 operators that cost nothing and pass every tuple, as fast
    /// as possible (the defaults of `moirai run syn`).
    fn default() -> Self {
        SynConfig {
            queries: 1,
            ops: 5,
            cost_ns: 0,
            selectivity: 1.0,
            rate: 0.0,
            parallelism: 1,
            seed: 0,
            variance_factor: 0,
            operator_variance: 0.0,
            draw_selectivity: false,
            selectivity_above_one: false,
            blocking: false,
            blocking_share: 0.1,
            block_probability: 0.001,
            block_max_ms: 200,
            sink_cost: false,
            heavy: None,
        }
    }
}

impl SynConfig {
    /// The Lachesis evaluation's SYN (`Chain --nqueries 20 --chainLength 3 --cost 400
    /// --varianceFactor 5 --selectivity 1`): 20 queries × 3 operators, costs 1–32 µs per tuple
    /// (400 multiplications were about 1 µs on the Odroid's big cores), ±10 % per operator,
    /// sinks that cost as much as an operator, 75 tuples/s per query (1500 t/s in total, the middle
    /// of the paper's sweep). Set `blocking` for `ChainBlocking`.
    pub fn lachesis() -> Self {
        SynConfig {
            queries: 20,
            ops: 3,
            cost_ns: 1_000,
            selectivity: 1.0,
            rate: 75.0,
            variance_factor: 5,
            operator_variance: 0.1,
            draw_selectivity: true,
            sink_cost: true,
            ..SynConfig::default()
        }
    }

    /// Checks every parameter; the error says which and how to fix it.
    pub fn validate(&self) -> Result<(), BuildError> {
        let bad = |m: String| Err(BuildError::Config(m));
        if self.queries == 0 {
            return bad("SYN needs at least 1 query (queries = 0)".into());
        }
        crate::check::parallelism("parallelism", self.parallelism, MAX_PARALLELISM).map_err(BuildError::Config)?;
        // Each query is a source, `ops` operators and a sink, each its own physical operator per
        // instance.
        let physical = self.queries.saturating_mul(self.ops.saturating_add(2)).saturating_mul(self.parallelism);
        if physical > moirai_engine::engine::MAX_PHYSICAL_OPERATORS {
            return bad(format!(
                "{} queries x ({} operators + source + sink) x parallelism {} = {physical} operators exceed the \
                 engine's bound of {}; use fewer queries or operators, or a lower parallelism",
                self.queries,
                self.ops,
                self.parallelism,
                moirai_engine::engine::MAX_PHYSICAL_OPERATORS
            ));
        }
        if !(self.selectivity.is_finite() && self.selectivity >= 0.0) {
            return bad(format!("selectivity {} must be a finite number >= 0", self.selectivity));
        }
        if self.draw_selectivity && !(self.selectivity > 0.0 && self.selectivity <= 1.0) {
            return bad(format!(
                "selectivity {} must be in (0, 1] when drawn: it is the lowest end-to-end selectivity of a query",
                self.selectivity
            ));
        }
        crate::check::rate("rate", self.rate).map_err(BuildError::Config)?;
        if self.variance_factor >= 32 || self.cost_ns.checked_mul(1 << self.variance_factor).is_none() {
            return bad(format!(
                "cost {} ns · 2^{} does not fit: use a variance factor below 32 and a smaller cost",
                self.cost_ns, self.variance_factor
            ));
        }
        // The dearest query costs cost_ns · 2^variance_factor (its operators up to ± the variance).
        let dearest = self.cost_ns << self.variance_factor;
        if let Err(e) = crate::check::cost_ns("cost", dearest) {
            return bad(if self.variance_factor == 0 {
                e
            } else {
                format!("{e} (cost {} ns · 2^{} = {dearest} ns)", self.cost_ns, self.variance_factor)
            });
        }
        if !(0.0..1.0).contains(&self.operator_variance) {
            return bad(format!("operator variance {} must be a share in [0, 1), e.g. 0.1", self.operator_variance));
        }
        for (name, p) in [("blocking share", self.blocking_share), ("block probability", self.block_probability)] {
            if !(0.0..=1.0).contains(&p) {
                return bad(format!("{name} {p} must be a probability in [0, 1]"));
            }
        }
        if self.blocking && self.block_max_ms == 0 {
            return bad("blocking needs block_max_ms > 0 (Lachesis used 200)".into());
        }
        if let Some((k, factor)) = self.heavy {
            if !(1..=self.ops).contains(&k) {
                return bad(format!("heavy operator {k} is not one of the {} operators (1 to {})", self.ops, self.ops));
            }
            if !(1..=MAX_HEAVY_FACTOR).contains(&factor) {
                return bad(format!("heavy factor {factor} must be from 1 to {MAX_HEAVY_FACTOR}"));
            }
            let heaviest = (self.cost_ns << self.variance_factor).saturating_mul(factor);
            crate::check::cost_ns("heavy operator's cost", heaviest)
                .map_err(|e| BuildError::Config(format!("{e} (cost × heavy factor {factor})")))?;
        }
        Ok(())
    }
}

/// The most instances of each SYN operator (`--parallelism`): far more than there are cores.
pub const MAX_PARALLELISM: usize = 1024;

/// The largest factor by which one operator may be heavier than the others.
pub const MAX_HEAVY_FACTOR: u64 = 1000;

/// The drawn parameters of one operator.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SynOperatorParams {
    /// CPU time per tuple, ns.
    pub cost_ns: u64,
    /// Output tuples per input tuple.
    pub selectivity: f64,
    /// Whether it sleeps now and then (see [`SynConfig::blocking`]).
    pub blocking: bool,
}

/// The drawn parameters of one query.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SynQueryParams {
    /// The query's cost, ns per tuple, around which its operators vary.
    pub cost_ns: u64,
    /// The query's operator selectivity, around which its operators vary.
    pub selectivity: f64,
    /// Its operators, upstream first.
    pub operators: Vec<SynOperatorParams>,
    /// CPU time the sink burns per tuple, ns (0 unless [`SynConfig::sink_cost`]).
    pub sink_cost_ns: u64,
}

/// `base ± share` uniformly, as Liebre's `withVariance` for integers.
fn vary_cost(rng: &mut fastrand::Rng, base: u64, share: f64) -> u64 {
    let spread = (base as f64 * share) as i64;
    if spread == 0 {
        return base;
    }
    base.saturating_add_signed(rng.i64(-spread..=spread))
}

/// `base ± share` uniformly, for reals.
fn vary(rng: &mut fastrand::Rng, base: f64, share: f64) -> f64 {
    if share == 0.0 {
        return base;
    }
    let spread = base * share;
    base - spread + rng.f64() * 2.0 * spread
}

/// Draws every query's and operator's parameters from `config.seed`.
pub fn draw(config: &SynConfig) -> Result<Vec<SynQueryParams>, BuildError> {
    config.validate()?;
    let mut rng = fastrand::Rng::with_seed(config.seed);
    // A drawn selectivity may exceed 1 through the operator variance; it is kept only when asked,
    // or when the configured selectivity is above 1 already.
    let max_selectivity = if config.selectivity_above_one { f64::INFINITY } else { config.selectivity.max(1.0) };
    let queries = (0..config.queries)
        .map(|_| {
            let cost_ns = config.cost_ns << rng.u32(0..=config.variance_factor);
            let selectivity = if config.draw_selectivity {
                let min = config.selectivity.powf(1.0 / config.ops.max(1) as f64);
                min + rng.f64() * (1.0 - min)
            } else {
                config.selectivity
            };
            let operators = (0..config.ops)
                .map(|k| {
                    // Decided first, as in Liebre's ChainBlocking factory.
                    let blocking = config.blocking && rng.f64() < config.blocking_share;
                    let cost_ns = vary_cost(&mut rng, cost_ns, config.operator_variance);
                    let cost_ns = match config.heavy {
                        Some((heavy, factor)) if heavy == k + 1 => cost_ns.saturating_mul(factor),
                        _ => cost_ns,
                    };
                    let selectivity = vary(&mut rng, selectivity, config.operator_variance).min(max_selectivity);
                    SynOperatorParams { cost_ns, selectivity, blocking }
                })
                .collect();
            let sink_cost_ns =
                if config.sink_cost { vary_cost(&mut rng, cost_ns, config.operator_variance) } else { 0 };
            SynQueryParams { cost_ns, selectivity, operators, sink_cost_ns }
        })
        .collect();
    Ok(queries)
}

/// The SYN operator: spins for its cost, maybe blocks, then passes the tuple on with its
/// selectivity.
pub struct SynOperator {
    spin: Spin,
    selectivity: f64,
    /// `(probability per tuple, longest sleep)` of a blocking operator.
    block: Option<(f64, Duration)>,
    rng: fastrand::Rng,
}

impl SynOperator {
    /// An operator with cost `cost_ns` and `selectivity`.
    pub fn new(cost_ns: u64, selectivity: f64, seed: u64) -> Self {
        SynOperator { spin: Spin::new(cost_ns), selectivity, block: None, rng: fastrand::Rng::with_seed(seed) }
    }

    /// Makes it sleep `U[0, max)` with `probability` per tuple.
    pub fn blocking(mut self, probability: f64, max: Duration) -> Self {
        self.block = Some((probability, max));
        self
    }
}

impl Operator<u64, u64> for SynOperator {
    #[inline]
    fn process(&mut self, t: Tuple<u64>, out: &mut Output<'_, u64>) {
        self.spin.run(t.data);
        if let Some((probability, max)) = self.block {
            if self.rng.f64() < probability {
                std::thread::sleep(max.mul_f64(self.rng.f64()));
            }
        }
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

/// Builds the SYN queries `syn0`, `syn1`, ...: `source → op1 … opN → sink`, `parallelism`
/// instances each joined by forward edges, with the parameters [`draw`] gives.
pub fn queries(config: &SynConfig) -> Result<Vec<BuiltQuery>, BuildError> {
    let block_max = Duration::from_millis(config.block_max_ms);
    let block_probability = config.block_probability;
    draw(config)?
        .into_iter()
        .enumerate()
        .map(|(q, params)| {
            let query = Query::new(&format!("syn{q}"));
            let p = config.parallelism;
            let mut stream = query.source("source", Source::new(|_, _| 0u64..).rate(config.rate)).parallelism(p);
            for (i, op) in params.operators.into_iter().enumerate() {
                let seed = config.seed ^ ((q as u64) << 32) ^ (i as u64 + 1);
                stream = stream.process(&format!("op{}", i + 1), move |instance| {
                    let operator = SynOperator::new(op.cost_ns, op.selectivity, seed ^ ((instance as u64) << 48));
                    if op.blocking {
                        operator.blocking(block_probability, block_max)
                    } else {
                        operator
                    }
                });
                stream = stream.parallelism(p);
            }
            if params.sink_cost_ns > 0 {
                let sink_cost = params.sink_cost_ns;
                stream.sink_with("sink", move |_| {
                    let spin = Spin::new(sink_cost);
                    move |t: Tuple<u64>| {
                        std::hint::black_box(spin.run(t.data));
                    }
                });
            } else {
                stream.discard("sink");
            }
            query.build()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heavy_operator_costs_its_factor_more_and_nothing_else_changes() {
        let plain = SynConfig { queries: 2, ops: 5, cost_ns: 5_000, ..SynConfig::default() };
        let heavy = SynConfig { heavy: Some((3, 4)), ..plain.clone() };
        for (p, h) in draw(&plain).unwrap().iter().zip(draw(&heavy).unwrap()) {
            let costs: Vec<u64> = h.operators.iter().map(|o| o.cost_ns).collect();
            assert_eq!(costs, [5_000, 5_000, 20_000, 5_000, 5_000]);
            assert_eq!(
                p.operators.iter().map(|o| o.selectivity).collect::<Vec<_>>(),
                h.operators.iter().map(|o| o.selectivity).collect::<Vec<_>>()
            );
        }
        // With drawn costs the factor applies to the drawn cost, and the other draws are the same.
        let lachesis = SynConfig::lachesis();
        let heavy = SynConfig { heavy: Some((1, 2)), ..lachesis.clone() };
        for (p, h) in draw(&lachesis).unwrap().iter().zip(draw(&heavy).unwrap()) {
            assert_eq!(h.operators[0].cost_ns, p.operators[0].cost_ns * 2);
            assert_eq!(h.operators[1..], p.operators[1..]);
        }
        let msg = |heavy| SynConfig { heavy: Some(heavy), ..plain.clone() }.validate().unwrap_err().to_string();
        assert!(msg((0, 4)).contains("heavy operator 0 is not one of the 5 operators"));
        assert!(msg((6, 4)).contains("heavy operator 6"));
        assert!(msg((2, 0)).contains("heavy factor 0 must be from 1"));
        assert!(msg((2, 1_000_000)).contains("heavy factor"));
    }

    #[test]
    fn the_simple_form_gives_every_operator_the_same_parameters() {
        let config = SynConfig { queries: 3, ops: 4, cost_ns: 500, selectivity: 0.5, ..SynConfig::default() };
        for q in draw(&config).unwrap() {
            assert_eq!(q.sink_cost_ns, 0);
            assert_eq!(q.operators.len(), 4);
            for op in q.operators {
                assert_eq!(op, SynOperatorParams { cost_ns: 500, selectivity: 0.5, blocking: false });
            }
        }
        // Asked-for copies are kept in the simple form.
        let config = SynConfig { selectivity: 2.5, ..SynConfig::default() };
        assert!(draw(&config).unwrap()[0].operators.iter().all(|op| op.selectivity == 2.5));
    }

    #[test]
    fn lachesis_draws_are_deterministic_per_seed() {
        let config = SynConfig { blocking: true, ..SynConfig::lachesis() };
        assert_eq!(draw(&config).unwrap(), draw(&config).unwrap());
        let other = SynConfig { seed: 1, ..config.clone() };
        assert_ne!(draw(&config).unwrap(), draw(&other).unwrap(), "another seed must give other queries");
    }

    #[test]
    fn lachesis_draws_stay_within_their_ranges() {
        let config = SynConfig { queries: 400, selectivity: 0.2, blocking: true, ..SynConfig::lachesis() };
        let queries = draw(&config).unwrap();
        let min_selectivity = 0.2f64.powf(1.0 / 3.0);
        let (mut exponents, mut blocking, mut ops) = (std::collections::BTreeSet::new(), 0, 0);
        for q in &queries {
            assert!(q.cost_ns % 1_000 == 0 && (q.cost_ns / 1_000).is_power_of_two(), "{}", q.cost_ns);
            exponents.insert((q.cost_ns / 1_000).trailing_zeros());
            assert!((min_selectivity..=1.0).contains(&q.selectivity), "{}", q.selectivity);
            let cost_band = q.cost_ns - q.cost_ns / 10..=q.cost_ns + q.cost_ns / 10;
            assert!(cost_band.contains(&q.sink_cost_ns), "sink {} vs query {}", q.sink_cost_ns, q.cost_ns);
            for op in &q.operators {
                ops += 1;
                blocking += op.blocking as usize;
                assert!(cost_band.contains(&op.cost_ns), "{} vs {}", op.cost_ns, q.cost_ns);
                assert!(op.selectivity >= q.selectivity * 0.9 && op.selectivity <= 1.0, "{}", op.selectivity);
            }
        }
        // Every exponent 0..=5 occurs among 400 queries, and about 10 % of the 1200 operators
        // block (a 5-sigma band around 120).
        assert_eq!(exponents.into_iter().collect::<Vec<_>>(), (0..=5).collect::<Vec<_>>());
        assert!((70..=170).contains(&blocking), "{blocking} of {ops} operators block");
    }

    #[test]
    fn selectivities_above_one_need_asking() {
        let config = SynConfig { queries: 200, ..SynConfig::lachesis() };
        let max = |c: &SynConfig| {
            draw(c).unwrap().iter().flat_map(|q| q.operators.iter().map(|o| o.selectivity)).fold(0.0, f64::max)
        };
        assert_eq!(max(&config), 1.0);
        let asked = max(&SynConfig { selectivity_above_one: true, ..config });
        assert!(asked > 1.0 && asked <= 1.1, "{asked}");
    }

    #[test]
    fn bad_parameters_are_explained() {
        let cases = [
            (SynConfig { queries: 0, ..SynConfig::default() }, "queries"),
            (SynConfig { selectivity: f64::NAN, ..SynConfig::default() }, "selectivity"),
            (SynConfig { selectivity: 1.5, ..SynConfig::lachesis() }, "(0, 1]"),
            (SynConfig { variance_factor: 40, ..SynConfig::lachesis() }, "variance factor"),
            (SynConfig { operator_variance: 1.5, ..SynConfig::lachesis() }, "operator variance"),
            (SynConfig { block_probability: 2.0, ..SynConfig::lachesis() }, "block probability"),
            (SynConfig { rate: -1.0, ..SynConfig::default() }, "rate"),
            (SynConfig { parallelism: 0, ..SynConfig::default() }, "parallelism 0 must be in 1..=1024"),
            (SynConfig { parallelism: 1025, ..SynConfig::default() }, "parallelism 1025"),
            (SynConfig { queries: 100, ops: 100, parallelism: 20, ..SynConfig::default() }, "parallelism 20 = 204000"),
            (SynConfig { rate: 1e25, ..SynConfig::default() }, "at most 1000000000 tuples/s"),
            (SynConfig { cost_ns: u64::MAX, ..SynConfig::default() }, "1 s per tuple"),
            (SynConfig { cost_ns: 100_000_000, ..SynConfig::lachesis() }, "2^5 = 3200000000 ns"),
        ];
        for (config, needle) in cases {
            match queries(&config) {
                Err(BuildError::Config(m)) => assert!(m.contains(needle), "'{m}' should mention '{needle}'"),
                Err(e) => panic!("unexpected error {e}"),
                Ok(_) => panic!("{config:?} should be rejected"),
            }
        }
    }
}
