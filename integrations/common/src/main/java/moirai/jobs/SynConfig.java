package moirai.jobs;

/**
 * Parameters of a SYN job, as moirai's {@code SynConfig} ({@code crates/workloads/src/syn.rs}):
 * the defaults are the simple form (what {@code moirai run syn} starts), {@link #lachesis()} the
 * form of the Lachesis evaluation. {@link SynDraw#draw} draws every query's and operator's
 * parameters from {@link #seed}, bit for bit as moirai does.
 */
public final class SynConfig implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    /** Independent queries. */
    public int queries = 1;
    /** Operators between source and sink, per query. */
    public int ops = 5;
    /** CPU time per tuple and operator, ns: the base cost of a query. */
    public long costNs = 0;
    /** Output tuples per input tuple; with {@link #drawSelectivity}, a query's lowest end-to-end selectivity. */
    public double selectivity = 1.0;
    /** Seed of all draws. */
    public long seed = 0;
    /** A query's cost is {@code costNs · 2^U{0..=varianceFactor}}. */
    public int varianceFactor = 0;
    /** Each operator's cost and selectivity are its query's ± this share, uniformly. */
    public double operatorVariance = 0.0;
    /** Draw each query's operator selectivity uniformly in {@code [selectivity^(1/ops), 1]}. */
    public boolean drawSelectivity = false;
    /** Keep drawn selectivities above 1 (else clamped to 1). */
    public boolean selectivityAboveOne = false;
    /** Make a share of the operators block now and then. */
    public boolean blocking = false;
    /** Share of operators that block, when {@link #blocking}. */
    public double blockingShare = 0.1;
    /** Probability per tuple that a blocking operator sleeps. */
    public double blockProbability = 0.001;
    /** A blocking operator sleeps {@code U[0, blockMaxMs)} ms. */
    public long blockMaxMs = 200;
    /** The sink burns an operator's cost per tuple too. */
    public boolean sinkCost = false;
    /** Operator k (from 1) costs {@link #heavyFactor} times its drawn cost; 0 = none heavier. */
    public int heavyOp = 0;
    /** How much heavier {@link #heavyOp} is. */
    public long heavyFactor = 4;

    /** The largest factor by which one operator may be heavier than the others (moirai's bound). */
    public static final long MAX_HEAVY_FACTOR = 1000;
    /** The largest cost of an operator, ns (1 s, moirai's bound). */
    public static final long MAX_COST_NS = 1_000_000_000L;

    /** The simple form: one query of 5 operators that cost nothing and pass every tuple. */
    public SynConfig() {}

    /**
     * The Lachesis evaluation's SYN: 20 queries × 3 operators, costs 1000 ns · 2^U{0..=5}, ±10 % per
     * operator, drawn selectivities, sinks with cost ({@code SynConfig::lachesis()}).
     */
    public static SynConfig lachesis() {
        SynConfig c = new SynConfig();
        c.queries = 20;
        c.ops = 3;
        c.costNs = 1_000;
        c.selectivity = 1.0;
        c.varianceFactor = 5;
        c.operatorVariance = 0.1;
        c.drawSelectivity = true;
        c.sinkCost = true;
        return c;
    }

    /** Whether any draw differs from the simple form's fixed parameters. */
    public boolean drawn() {
        return varianceFactor != 0 || operatorVariance != 0 || drawSelectivity || blocking || sinkCost;
    }

    /** Checks the parameters as moirai's {@code SynConfig::validate}; null if fine, else what to change. */
    public String validate() {
        if (queries < 1) {
            return "SYN needs at least 1 query (--queries 0)";
        }
        if (!(Double.isFinite(selectivity) && selectivity >= 0)) {
            return "--selectivity " + selectivity + " must be a finite number >= 0";
        }
        if (drawSelectivity && !(selectivity > 0 && selectivity <= 1)) {
            return "--selectivity " + selectivity + " must be in (0, 1] with --lachesis: it is the lowest end-to-end "
                    + "selectivity of a query";
        }
        if (varianceFactor < 0 || varianceFactor >= 32 || costNs > (Long.MAX_VALUE >>> varianceFactor)) {
            return "cost " + costNs + " ns · 2^" + varianceFactor + " does not fit: use a smaller --cost-ns";
        }
        long dearest = costNs << varianceFactor;
        if (dearest > MAX_COST_NS) {
            return "--cost-ns " + costNs + " is too high: an operator may cost at most 1 s per tuple"
                    + (varianceFactor == 0 ? "" : " (cost " + costNs + " ns · 2^" + varianceFactor + " = " + dearest + " ns)");
        }
        if (!(operatorVariance >= 0 && operatorVariance < 1)) {
            return "operator variance " + operatorVariance + " must be a share in [0, 1)";
        }
        if (heavyOp != 0) {
            if (heavyOp < 1 || heavyOp > ops) {
                return "--heavy-op " + heavyOp + " is not one of the " + ops + " operators (1 to " + ops + ")";
            }
            if (heavyFactor < 1 || heavyFactor > MAX_HEAVY_FACTOR) {
                return "--heavy-factor " + heavyFactor + " must be from 1 to " + MAX_HEAVY_FACTOR;
            }
            if (dearest > MAX_COST_NS / heavyFactor) {
                return "the heavy operator's cost " + dearest + " ns × " + heavyFactor
                        + " exceeds 1 s per tuple: use a smaller --cost-ns or --heavy-factor";
            }
        }
        return null;
    }
}
