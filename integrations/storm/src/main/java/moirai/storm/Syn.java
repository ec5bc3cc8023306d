package moirai.storm;

import java.util.List;
import java.util.function.Consumer;

import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.TopologyBuilder;

import moirai.jobs.Offered;
import moirai.jobs.Spin;
import moirai.jobs.SynConfig;
import moirai.jobs.SynDraw;
import moirai.jobs.SynOperator;
import moirai.jobs.SynTuple;

/**
 * SYN (Haren / Lachesis), moirai's {@code crates/workloads/src/syn.rs}, as a Storm topology: per
 * query {@code q}, {@code syn<q>-source → syn<q>-op1 → … → syn<q>-opK → syn<q>-sink}, shuffle
 * groupings, every operator burning its drawn cost of CPU per tuple, maybe blocking, and passing
 * tuples on with its drawn selectivity ({@link SynDraw}, {@link SynOperator}); the sink burns its
 * drawn cost (none in the simple form).
 */
final class Syn {
    private Syn() {}

    /** The component id of operator {@code k} (0 = source, ops + 1 = sink) of query {@code q}. */
    static String component(int q, int k, int ops) {
        return "syn" + q + "-" + (k == 0 ? "source" : k == ops + 1 ? "sink" : "op" + k);
    }

    /** Adds the queries to {@code builder}; {@code offered} is the schedule of all queries together. */
    static void build(TopologyBuilder builder, SynConfig c, List<SynDraw.QueryParams> params, Offered offered,
            long durationNs, int p) {
        Offered perQuery = offered.split(c.queries);
        for (int q = 0; q < c.queries; q++) {
            SynDraw.QueryParams qp = params.get(q);
            String upstream = component(q, 0, c.ops);
            builder.setSpout(upstream, new Source(perQuery, durationNs), p).setNumTasks(p);
            for (int k = 1; k <= c.ops; k++) {
                String id = component(q, k, c.ops);
                builder.setBolt(id, new Operator(c, qp.operators.get(k - 1), q, k), p).setNumTasks(p)
                        .shuffleGrouping(upstream).allGrouping(upstream, End.STREAM);
                upstream = id;
            }
            builder.setBolt(component(q, c.ops + 1, c.ops), new SynSink(qp.sinkCostNs), p).setNumTasks(p)
                    .shuffleGrouping(upstream).allGrouping(upstream, End.STREAM);
        }
    }

    /** A SYN spout: the n-th tuple of an instance carries the value n. */
    static final class Source extends OpenLoopSpout<SynTuple> {
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

    /** The SYN operator ({@link SynOperator}) as a bolt. */
    static final class Operator extends Bolt<SynTuple, SynTuple> {
        private static final long serialVersionUID = 1L;

        private final SynConfig config;
        private final SynDraw.OperatorParams params;
        private final int query;
        private final int op;
        private transient SynOperator operator;

        Operator(SynConfig config, SynDraw.OperatorParams params, int query, int op) {
            this.config = config;
            this.params = params;
            this.query = query;
            this.op = op;
        }

        @Override
        void open(TopologyContext context) {
            operator = new SynOperator(config, params, query, op, context.getThisTaskIndex());
        }

        @Override
        void process(SynTuple t, Consumer<SynTuple> out) {
            operator.process(t, out);
        }

        @Override
        public void cleanup() {
            if (operator != null) {
                operator.close();
            }
        }
    }

    /** The SYN sink: latency as every sink, after burning its cost (if any). */
    static final class SynSink extends Sink<SynTuple> {
        private static final long serialVersionUID = 1L;

        private final long costNs;
        private transient Spin spin;
        private transient long blackHole;

        SynSink(long costNs) {
            this.costNs = costNs;
        }

        @Override
        void open(TopologyContext context) {
            spin = new Spin(costNs);
        }

        @Override
        void before(SynTuple t) {
            blackHole ^= spin.run(t.value);
        }

        @Override
        public void cleanup() {
            Spin.keep(blackHole);
            super.cleanup();
        }
    }
}
