//! SYN: synthetic pipelines (source → N operators of a given CPU cost and selectivity → sink),
//! the Lachesis evaluation's workload.

use clap::Args;
use moirai_engine::BuiltQuery;
use moirai_workloads::syn::{self, SynConfig};

use super::{After, EngineArgs, Workload};

#[derive(Args, Clone, Debug)]
pub struct SynArgs {
    /// Start from the Lachesis evaluation's SYN (20 queries x 3 operators, per-query cost
    /// c*2^U{0..5} with +-10 % per operator, drawn selectivities, sinks with cost); the flags
    /// below override it.
    #[arg(long)]
    lachesis: bool,
    /// Independent queries [default: 1; 20 with --lachesis].
    #[arg(long)]
    queries: Option<usize>,
    /// Operators between source and sink, per query [default: 5; 3 with --lachesis].
    #[arg(long)]
    ops: Option<usize>,
    /// CPU time per tuple and operator, in ns, a calibrated busy loop, at most 1 s [default: 0;
    /// 1000 with --lachesis].
    #[arg(long)]
    cost_ns: Option<u64>,
    /// Output tuples per input tuple of each operator [default: 1].
    #[arg(long)]
    selectivity: Option<f64>,
    /// Make 10 % of the operators block (sleep up to 200 ms with probability 0.001 per tuple).
    #[arg(long)]
    blocking: bool,
    /// Operator K (from 1) of every query costs --heavy-factor times as much: one bottleneck.
    #[arg(long, value_name = "K")]
    heavy_op: Option<usize>,
    /// How much heavier the --heavy-op operator is [default: 4].
    #[arg(long, value_name = "F", requires = "heavy_op")]
    heavy_factor: Option<u64>,
    /// Instances of each query's source, operators and sink (data parallelism, at most 1024):
    /// instance i of the source offers its share of --rate to instance i of every operator over
    /// forward edges; under dynamic:N and policy:...:N instance i runs on worker i mod N.
    #[arg(long, default_value_t = 1)]
    parallelism: usize,
    /// Seed of the parameter and selectivity draws.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
}

/// The SYN configuration the flags ask for (the rate from `--rate`, in total over the queries).
pub(crate) fn syn_config(a: &SynArgs) -> Result<SynConfig, String> {
    let mut config = if a.lachesis { SynConfig::lachesis() } else { SynConfig::default() };
    config.queries = a.queries.unwrap_or(config.queries);
    config.ops = a.ops.unwrap_or(config.ops);
    a.cost_ns.map_or(Ok(()), |c| moirai_workloads::check::cost_ns("--cost-ns", c))?;
    config.cost_ns = a.cost_ns.unwrap_or(config.cost_ns);
    config.selectivity = a.selectivity.unwrap_or(config.selectivity);
    config.blocking = a.blocking;
    config.heavy = a.heavy_op.map(|k| (k, a.heavy_factor.unwrap_or(4)));
    // SynConfig's rate is per query; the command line's, like every workload's, in total.
    config.rate = a.engine.rate / config.queries.max(1) as f64;
    moirai_workloads::check::parallelism("--parallelism", a.parallelism, syn::MAX_PARALLELISM)?;
    config.parallelism = a.parallelism;
    config.seed = a.seed;
    Ok(config)
}

impl Workload for SynArgs {
    fn name(&self) -> &'static str {
        "syn"
    }

    fn engine_args(&self) -> &EngineArgs {
        &self.engine
    }

    fn params(&self) -> serde_json::Value {
        syn_config(self).ok().and_then(|c| serde_json::to_value(c).ok()).unwrap_or_default()
    }

    fn queries(&self) -> Result<(Vec<BuiltQuery>, After), String> {
        let queries = syn::queries(&syn_config(self)?).map_err(|e| e.to_string())?;
        Ok((queries, Box::new(|| serde_json::Value::Null)))
    }
}
