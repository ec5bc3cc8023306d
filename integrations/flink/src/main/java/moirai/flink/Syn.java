package moirai.flink;

import java.util.List;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;

import moirai.jobs.Offered;
import moirai.jobs.Registry;
import moirai.jobs.Spin;
import moirai.jobs.SynConfig;
import moirai.jobs.SynDraw;
import moirai.jobs.SynOperator;
import moirai.jobs.SynTuple;

/**
 * SYN (Haren / Lachesis), moirai's {@code crates/workloads/src/syn.rs}: per query {@code i},
 * {@code syn<i>/source → syn<i>/op1 → … → syn<i>/opK → syn<i>/sink}, forward edges, every operator
 * burning its drawn cost of CPU per tuple (a calibrated busy loop), maybe blocking, and passing
 * tuples on with its drawn selectivity ({@link SynDraw}: the simple form gives every operator
 * {@code cost_ns} and {@code selectivity}, operator {@code heavy_op} {@code heavy_factor} times the
 * cost; {@code --lachesis} draws them); the sink burns its drawn cost (none in the simple form).
 */
final class Syn {
    private Syn() {}

    /**
     * Adds the queries to {@code env}; {@code offered} is the schedule of all queries together;
     * {@code results}, on a standalone cluster only (else null), adds its probes.
     */
    static void build(StreamExecutionEnvironment env, SynConfig c, List<SynDraw.QueryParams> params, Offered offered,
            long durationNs, int parallelism, ClusterResults results) {
        Offered perQuery = offered.split(c.queries);
        for (int q = 0; q < c.queries; q++) {
            String query = "syn" + q;
            SynDraw.QueryParams p = params.get(q);
            DataStream<SynTuple> stream = env
                    .fromSource(new Source(perQuery, durationNs), WatermarkStrategy.noWatermarks(), query + "/source",
                            TypeInformation.of(SynTuple.class))
                    .setParallelism(parallelism);
            if (results != null) {
                stream = results.ingress(stream, query + "/ingress-probe");
            }
            for (int i = 1; i <= c.ops; i++) {
                stream = stream.flatMap(new Operator(c, p.operators.get(i - 1), q, i))
                        .name(query + "/op" + i)
                        .uid(query + "/op" + i)
                        .setParallelism(parallelism);
            }
            if (results != null) {
                stream = results.latency(stream, results.probe(), query + "/latency-probe", parallelism);
            }
            DataStreamSink<SynTuple> sink = stream.sinkTo(new Sink(p.sinkCostNs))
                    .name(query + "/sink")
                    .uid(query + "/sink")
                    .setParallelism(parallelism);
            if (results != null) {
                results.sink(sink);
            }
        }
    }

    /** A SYN source: the n-th tuple of an instance carries the value n. */
    static final class Source extends OpenLoopSource<SynTuple> {
        private static final long serialVersionUID = 1L;

        Source(Offered offered, long durationNs) {
            super(offered, durationNs);
        }

        @Override
        OpenLoopReader.Generator<SynTuple> generator(int instance, int parallelism) {
            return n -> {
                SynTuple t = new SynTuple();
                t.value = n;
                return t;
            };
        }
    }

    /** The SYN operator ({@link SynOperator}) as a Flink function. */
    static final class Operator extends RichFlatMapFunction<SynTuple, SynTuple> {
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
        public void open(OpenContext context) throws Exception {
            super.open(context);
            int instance = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            operator = new SynOperator(config, params, query, op, instance);
            Registry.SUBTASKS.incrementAndGet();
        }

        @Override
        public void flatMap(SynTuple t, Collector<SynTuple> out) {
            operator.process(t, out::collect);
        }

        @Override
        public void close() throws Exception {
            if (operator != null) {
                operator.close();
            }
            super.close();
        }
    }

    /** The SYN sink: latency as every sink, after burning its cost (if any). */
    static final class Sink extends LatencySink<SynTuple> {
        private static final long serialVersionUID = 1L;

        private final long costNs;
        private transient Spin spin;
        private transient long blackHole;

        Sink(long costNs) {
            this.costNs = costNs;
        }

        @Override
        void open() {
            spin = new Spin(costNs);
        }

        @Override
        void before(SynTuple t) {
            blackHole ^= spin.run(t.value);
        }

        @Override
        void end() {
            Spin.keep(blackHole);
        }
    }
}
