package moirai.flink;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;

/**
 * SYN (Haren / Lachesis), the simple form of moirai's {@code crates/workloads/src/syn.rs}: per
 * query {@code i}, {@code syn<i>/source → syn<i>/op1 → … → syn<i>/opK → syn<i>/sink}, forward
 * edges, every operator burning {@code cost_ns} of CPU per tuple (a calibrated busy loop) — operator
 * {@code heavy_op} {@code heavy_factor} times as much — and passing tuples on with
 * {@code selectivity}; the sink burns nothing (as moirai's plain SYN).
 */
final class Syn {
    private Syn() {}

    /** Parameters of a SYN job. */
    static final class Config {
        int queries = 1;
        int ops = 5;
        long costNs = 0;
        double selectivity = 1.0;
        long seed = 0;
        /** Operator k (from 1) costs {@code heavyFactor} times as much; 0 = none heavier. */
        int heavyOp = 0;
        long heavyFactor = 4;
    }

    /** Adds the queries to {@code env}; {@code offered} is the schedule of all queries together. */
    static void build(StreamExecutionEnvironment env, Config c, Offered offered, long durationNs, int parallelism) {
        Offered perQuery = offered.split(c.queries);
        for (int q = 0; q < c.queries; q++) {
            String query = "syn" + q;
            DataStream<SynTuple> stream = env
                    .addSource(new Source(perQuery, durationNs), query + "/source", TypeInformation.of(SynTuple.class))
                    .setParallelism(parallelism);
            for (int i = 1; i <= c.ops; i++) {
                long seed = c.seed ^ ((long) q << 32) ^ i;
                long cost = i == c.heavyOp ? c.costNs * c.heavyFactor : c.costNs;
                stream = stream.flatMap(new Operator(new Spin(cost), c.selectivity, seed))
                        .name(query + "/op" + i)
                        .uid(query + "/op" + i)
                        .setParallelism(parallelism);
            }
            stream.addSink(new LatencySink<>()).name(query + "/sink").uid(query + "/sink").setParallelism(parallelism);
        }
    }

    /** A SYN source: the n-th tuple of an instance carries the value n. */
    static final class Source extends OpenLoopSource<SynTuple> {
        private static final long serialVersionUID = 1L;

        Source(Offered offered, long durationNs) {
            super(offered, durationNs);
        }

        @Override
        void openGenerator(int instance, int parallelism) {}

        @Override
        SynTuple next(long n) {
            SynTuple t = new SynTuple();
            t.value = n;
            return t;
        }
    }

    /**
     * The SYN operator: spins for its cost, then emits {@code floor(s)} copies of the tuple plus one
     * more with probability {@code s − floor(s)}, drawn from a generator seeded per operator and
     * instance exactly as moirai seeds it (same seed, same tuples through).
     */
    static final class Operator extends RichFlatMapFunction<SynTuple, SynTuple> {
        private static final long serialVersionUID = 1L;

        private final Spin spin;
        private final double selectivity;
        private final long seed;
        private transient WyRand rng;
        private transient long blackHole;

        Operator(Spin spin, double selectivity, long seed) {
            this.spin = spin;
            this.selectivity = selectivity;
            this.seed = seed;
        }

        @Override
        public void open(OpenContext context) throws Exception {
            super.open(context);
            long instance = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            rng = new WyRand(seed ^ (instance << 48));
            Registry.SUBTASKS.incrementAndGet();
        }

        @Override
        public void flatMap(SynTuple t, Collector<SynTuple> out) {
            blackHole ^= spin.run(t.value);
            if (selectivity == 1.0) {
                out.collect(t);
                return;
            }
            double whole = Math.floor(selectivity);
            long copies = (long) whole;
            if (rng.nextDouble() < selectivity - whole) {
                copies++;
            }
            for (long c = 0; c < copies; c++) {
                out.collect(c == 0 ? t : t.copy());
            }
        }

        @Override
        public void close() throws Exception {
            Spin.keep(blackHole);
            super.close();
        }
    }
}
