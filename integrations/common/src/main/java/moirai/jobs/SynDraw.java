package moirai.jobs;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * moirai's {@code syn::draw} ({@code crates/workloads/src/syn.rs}), bit for bit: every query's and
 * operator's parameters drawn from one generator seeded with {@link SynConfig#seed}, consumed in
 * the same order (fastrand 2.x's {@code u32(0..=n)}, {@code i64(a..=b)}, {@code f64()}).
 *
 * <p>As a program, {@code SynDraw [syn flags]} prints the drawn parameters as JSON (the serde
 * shape of moirai's {@code Vec<SynQueryParams>}) without starting a job; {@code --bits} writes
 * every selectivity as the integer of its IEEE-754 bits instead, for exact comparisons.
 */
public final class SynDraw {
    private SynDraw() {}

    /** The drawn parameters of one operator ({@code SynOperatorParams}). */
    public static final class OperatorParams implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        /** CPU time per tuple, ns. */
        public final long costNs;
        /** Output tuples per input tuple. */
        public final double selectivity;
        /** Whether it sleeps now and then. */
        public final boolean blocking;

        OperatorParams(long costNs, double selectivity, boolean blocking) {
            this.costNs = costNs;
            this.selectivity = selectivity;
            this.blocking = blocking;
        }
    }

    /** The drawn parameters of one query ({@code SynQueryParams}). */
    public static final class QueryParams implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        /** The query's cost, ns per tuple, around which its operators vary. */
        public final long costNs;
        /** The query's operator selectivity, around which its operators vary. */
        public final double selectivity;
        /** Its operators, upstream first. */
        public final List<OperatorParams> operators;
        /** CPU time the sink burns per tuple, ns (0 without sink cost). */
        public final long sinkCostNs;

        QueryParams(long costNs, double selectivity, List<OperatorParams> operators, long sinkCostNs) {
            this.costNs = costNs;
            this.selectivity = selectivity;
            this.operators = operators;
            this.sinkCostNs = sinkCostNs;
        }
    }

    /** {@code base ± share} uniformly, as Liebre's {@code withVariance} for integers ({@code vary_cost}). */
    private static long varyCost(WyRand rng, long base, double share) {
        long spread = (long) ((double) base * share);
        if (spread == 0) {
            return base;
        }
        return saturatingAddSigned(base, rng.inclusive64(-spread, spread));
    }

    /** {@code base ± share} uniformly, for reals ({@code vary}). */
    private static double vary(WyRand rng, double base, double share) {
        if (share == 0.0) {
            return base;
        }
        double spread = base * share;
        return base - spread + rng.nextDouble() * 2.0 * spread;
    }

    /** Rust's {@code u64::saturating_add_signed} on an unsigned value held in a long. */
    private static long saturatingAddSigned(long base, long delta) {
        long sum = base + delta;
        if (delta < 0) {
            return Long.compareUnsigned(sum, base) > 0 ? 0 : sum;
        }
        return Long.compareUnsigned(sum, base) < 0 ? -1L : sum;
    }

    /** Rust's {@code u64::saturating_mul} on unsigned values held in longs (both below 2^63 here). */
    private static long saturatingMul(long a, long b) {
        long hi = Math.multiplyHigh(a, b);
        long lo = a * b;
        return hi != 0 || lo < 0 ? Long.MAX_VALUE : lo;
    }

    /** Draws every query's and operator's parameters from {@code c.seed}; throws on bad parameters. */
    public static List<QueryParams> draw(SynConfig c) {
        String problem = c.validate();
        if (problem != null) {
            throw new IllegalArgumentException(problem);
        }
        WyRand rng = new WyRand(c.seed);
        double maxSelectivity = c.selectivityAboveOne ? Double.POSITIVE_INFINITY : Math.max(c.selectivity, 1.0);
        List<QueryParams> queries = new ArrayList<>(c.queries);
        for (int q = 0; q < c.queries; q++) {
            long costNs = c.costNs << rng.inclusive32(0, c.varianceFactor);
            double selectivity;
            if (c.drawSelectivity) {
                double min = Math.pow(c.selectivity, 1.0 / Math.max(c.ops, 1));
                selectivity = min + rng.nextDouble() * (1.0 - min);
            } else {
                selectivity = c.selectivity;
            }
            List<OperatorParams> operators = new ArrayList<>(c.ops);
            for (int k = 0; k < c.ops; k++) {
                // Decided first, as in Liebre's ChainBlocking factory.
                boolean blocking = c.blocking && rng.nextDouble() < c.blockingShare;
                long opCost = varyCost(rng, costNs, c.operatorVariance);
                if (c.heavyOp == k + 1) {
                    opCost = saturatingMul(opCost, c.heavyFactor);
                }
                double opSelectivity = Math.min(vary(rng, selectivity, c.operatorVariance), maxSelectivity);
                operators.add(new OperatorParams(opCost, opSelectivity, blocking));
            }
            long sinkCostNs = c.sinkCost ? varyCost(rng, costNs, c.operatorVariance) : 0;
            queries.add(new QueryParams(costNs, selectivity, operators, sinkCostNs));
        }
        return queries;
    }

    /** The parameters as JSON values, the serde shape of {@code Vec<SynQueryParams>}. */
    public static List<Object> toJson(List<QueryParams> queries) {
        return toJson(queries, false);
    }

    private static List<Object> toJson(List<QueryParams> queries, boolean bits) {
        List<Object> out = new ArrayList<>(queries.size());
        for (QueryParams q : queries) {
            Map<String, Object> m = Json.object();
            m.put("cost_ns", q.costNs);
            m.put("selectivity", number(q.selectivity, bits));
            List<Object> ops = new ArrayList<>(q.operators.size());
            for (OperatorParams o : q.operators) {
                Map<String, Object> op = Json.object();
                op.put("cost_ns", o.costNs);
                op.put("selectivity", number(o.selectivity, bits));
                op.put("blocking", o.blocking);
                ops.add(op);
            }
            m.put("operators", ops);
            m.put("sink_cost_ns", q.sinkCostNs);
            out.add(m);
        }
        return out;
    }

    private static Object number(double v, boolean bits) {
        return bits ? new java.math.BigInteger(Long.toUnsignedString(Double.doubleToRawLongBits(v))) : (Object) v;
    }

    /**
     * {@code SynDraw [syn flags] [--bits]}: prints the drawn parameters as one line of JSON; the
     * flags are those of {@code Run syn} ({@code --lachesis}, {@code --queries}, {@code --seed}, ...).
     * Exit code 2 for a bad command line.
     */
    public static void main(String[] args) {
        boolean bits = false;
        List<String> rest = new ArrayList<>();
        rest.add("syn");
        for (String a : args) {
            if (a.equals("--bits")) {
                bits = true;
            } else {
                rest.add(a);
            }
        }
        Options o;
        try {
            o = Options.parse(rest.toArray(new String[0]), Options.Engine.NONE);
        } catch (Options.UsageError e) {
            System.err.println("moirai SynDraw: " + e.getMessage());
            System.exit(2);
            return;
        }
        if (o.help) {
            System.out.print(Options.usage(Options.Engine.NONE));
            return;
        }
        System.out.println(Json.write(toJson(draw(o.syn), bits)));
    }
}
