package moirai.flink;

import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.accumulators.LongMaximum;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.Collector;

import moirai.jobs.LrGenerator;
import moirai.jobs.LrOperators;
import moirai.jobs.LrRecords.AvgVehicleSpeed;
import moirai.jobs.LrRecords.CountTuple;
import moirai.jobs.LrRecords.Lav;
import moirai.jobs.LrRecords.Line;
import moirai.jobs.LrRecords.Notification;
import moirai.jobs.LrRecords.PositionReport;
import moirai.jobs.Offered;
import moirai.jobs.Registry;

/**
 * Linear Road as the Lachesis evaluation ran it (moirai's
 * {@code crates/workloads/src/linear_road/lachesis.rs}), the operators of {@link LrOperators} as a
 * Flink job.
 *
 * <pre>
 * source → dispatcher → average_speed → last_average_speed → toll_notification_las ─┐
 *                     → count_vehicles → toll_notification_cv ──────────────────────┼→ sink
 *                     → toll_notification_pos ──────────────────────────────────────┘
 * </pre>
 *
 * Every edge is a rebalance (Storm's shuffle grouping); the sink takes the union of the three
 * branches. The source generates position reports ({@link LrOperators.Lines}), formats them as
 * lines of the 15-column format, and the dispatcher parses them, as the original read them from a
 * file or Kafka.
 */
final class LinearRoad {
    private LinearRoad() {}

    /** Prefix of the vertex names (moirai's query name). */
    static final String QUERY = "linear_road_lachesis/";

    /** Adds the query to {@code env}; {@code results}, on a standalone cluster only (else null), adds its probes. */
    static void build(StreamExecutionEnvironment env, LrGenerator.Config traffic, Offered offered, long durationNs,
            int parallelism, ClusterResults results) {
        int p = parallelism;
        DataStream<Line> lines = env
                .fromSource(new Source(offered, durationNs, traffic), WatermarkStrategy.noWatermarks(), QUERY + "source",
                        TypeInformation.of(Line.class))
                .setParallelism(p);
        if (results != null) {
            lines = results.ingress(lines, QUERY + "ingress-probe");
        }
        DataStream<PositionReport> reports =
                lines.rebalance().flatMap(new Dispatcher(results != null)).name(QUERY + "dispatcher").setParallelism(p);
        DataStream<Notification> las = reports.rebalance()
                .transform(QUERY + "average_speed", TypeInformation.of(AvgVehicleSpeed.class), new AverageSpeed())
                .setParallelism(p)
                .rebalance()
                .flatMap(new LastAverageSpeed())
                .name(QUERY + "last_average_speed")
                .setParallelism(p)
                .rebalance()
                .flatMap(new TollNotificationLas())
                .name(QUERY + "toll_notification_las")
                .setParallelism(p);
        DataStream<Notification> cv = reports.rebalance()
                .flatMap(new CountVehicles())
                .name(QUERY + "count_vehicles")
                .setParallelism(p)
                .rebalance()
                .flatMap(new TollNotificationCv())
                .name(QUERY + "toll_notification_cv")
                .setParallelism(p);
        DataStream<Notification> pos = reports.rebalance()
                .flatMap(new TollNotificationPos())
                .name(QUERY + "toll_notification_pos")
                .setParallelism(p);
        DataStream<Notification> out = pos.rebalance().union(cv.rebalance(), las.rebalance());
        if (results != null) {
            out = results.latency(out, new Probe(results.durationNs, results.warmup), QUERY + "latency-probe", p);
        }
        DataStreamSink<Notification> sink = out.sinkTo(new Sink()).name(QUERY + "sink").setParallelism(p);
        if (results != null) {
            results.sink(sink);
        }
    }

    /** The generated lines, at the offered rate. */
    static final class Source extends OpenLoopSource<Line> {
        private static final long serialVersionUID = 1L;

        private final LrGenerator.Config traffic;

        Source(Offered offered, long durationNs, LrGenerator.Config traffic) {
            super(offered, durationNs);
            this.traffic = traffic;
        }

        @Override
        OpenLoopReader.Generator<Line> generator(int instance, int parallelism) {
            LrOperators.Lines lines = new LrOperators.Lines(traffic, instance, parallelism);
            return n -> lines.next();
        }
    }

    /** A flatMap of one of {@link LrOperators}' operators, counted as a subtask. */
    abstract static class Function<I, O> extends RichFlatMapFunction<I, O> {
        private static final long serialVersionUID = 1L;

        @Override
        public void open(OpenContext context) throws Exception {
            super.open(context);
            Registry.SUBTASKS.incrementAndGet();
        }
    }

    /**
     * dispatcher ({@link LrOperators#dispatch}); on a standalone cluster ({@code count}) it also
     * counts the lines and position reports of its own subtask, for the job's accumulators.
     */
    static final class Dispatcher extends Function<Line, PositionReport> {
        private static final long serialVersionUID = 1L;

        private final boolean count;
        private transient long lines;
        private transient long reports;

        Dispatcher(boolean count) {
            this.count = count;
        }

        @Override
        public void flatMap(Line l, Collector<PositionReport> out) {
            if (count) {
                lines++;
                LrOperators.dispatch(l, r -> {
                    reports++;
                    out.collect(r);
                });
            } else {
                LrOperators.dispatch(l, out::collect);
            }
        }

        @Override
        public void close() throws Exception {
            if (count) {
                getRuntimeContext().addAccumulator(ClusterResults.POSITION_REPORTS, new LongCounter(reports));
                getRuntimeContext().addAccumulator(ClusterResults.OTHER_RECORDS, new LongCounter(lines - reports));
            }
            super.close();
        }
    }

    /**
     * average_speed ({@link LrOperators.AverageSpeed}): an operator rather than a function, for
     * {@link BoundedOneInput#endInput()}, when the vehicle still held leaves.
     */
    static final class AverageSpeed extends AbstractStreamOperator<AvgVehicleSpeed>
            implements OneInputStreamOperator<PositionReport, AvgVehicleSpeed>, BoundedOneInput {
        private static final long serialVersionUID = 1L;

        private transient LrOperators.AverageSpeed op;

        @Override
        public void open() throws Exception {
            super.open();
            op = new LrOperators.AverageSpeed();
            Registry.SUBTASKS.incrementAndGet();
        }

        private void emit(AvgVehicleSpeed a) {
            output.collect(new StreamRecord<>(a));
        }

        @Override
        public void processElement(StreamRecord<PositionReport> record) {
            op.process(record.getValue(), this::emit);
        }

        @Override
        public void endInput() {
            op.end(this::emit);
        }
    }

    /** last_average_speed ({@link LrOperators.LastAverageSpeed}). */
    static final class LastAverageSpeed extends Function<AvgVehicleSpeed, Lav> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.LastAverageSpeed op;

        @Override
        public void open(OpenContext context) throws Exception {
            super.open(context);
            op = new LrOperators.LastAverageSpeed();
        }

        @Override
        public void flatMap(AvgVehicleSpeed a, Collector<Lav> out) {
            op.process(a, out::collect);
        }
    }

    /** count_vehicles ({@link LrOperators.CountVehicles}). */
    static final class CountVehicles extends Function<PositionReport, CountTuple> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.CountVehicles op;

        @Override
        public void open(OpenContext context) throws Exception {
            super.open(context);
            op = new LrOperators.CountVehicles();
        }

        @Override
        public void flatMap(PositionReport p, Collector<CountTuple> out) {
            op.process(p, out::collect);
        }
    }

    /** toll_notification_las ({@link LrOperators.TollNotificationLas}). */
    static final class TollNotificationLas extends Function<Lav, Notification> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.TollNotificationLas op;

        @Override
        public void open(OpenContext context) throws Exception {
            super.open(context);
            op = new LrOperators.TollNotificationLas();
        }

        @Override
        public void flatMap(Lav l, Collector<Notification> out) {
            op.process(l, out::collect);
        }
    }

    /** toll_notification_cv ({@link LrOperators.TollNotificationCv}). */
    static final class TollNotificationCv extends Function<CountTuple, Notification> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.TollNotificationCv op;

        @Override
        public void open(OpenContext context) throws Exception {
            super.open(context);
            op = new LrOperators.TollNotificationCv();
        }

        @Override
        public void flatMap(CountTuple c, Collector<Notification> out) {
            op.process(c, out::collect);
        }
    }

    /** toll_notification_pos ({@link LrOperators.TollNotificationPos}). */
    static final class TollNotificationPos extends Function<PositionReport, Notification> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.TollNotificationPos op;

        @Override
        public void open(OpenContext context) throws Exception {
            super.open(context);
            op = new LrOperators.TollNotificationPos();
        }

        @Override
        public void flatMap(PositionReport p, Collector<Notification> out) {
            op.process(p, out::collect);
        }
    }

    /**
     * The latency probe in front of the sink on a standalone cluster: notifications per branch,
     * deadline misses and the largest end-to-end latency of its subtask, as the sink counts them.
     */
    static final class Probe extends LatencyProbe<Notification> {
        private static final long serialVersionUID = 1L;

        private transient long[] branches;
        private transient long misses;
        private transient long maxE2eNs;

        Probe(long durationNs, double warmup) {
            super(durationNs, warmup);
        }

        @Override
        void accept(Notification n, long e2eNs) {
            if (branches == null) {
                branches = new long[3];
            }
            branches[n.branch]++;
            if (e2eNs > LrOperators.DEADLINE_NS) {
                misses++;
            }
            maxE2eNs = Math.max(maxE2eNs, e2eNs);
        }

        @Override
        void report() {
            for (int b = 0; b < 3; b++) {
                getRuntimeContext().addAccumulator(ClusterResults.NOTIFICATIONS + b,
                        new LongCounter(branches == null ? 0 : branches[b]));
            }
            getRuntimeContext().addAccumulator(ClusterResults.DEADLINE_MISSES, new LongCounter(misses));
            getRuntimeContext().addAccumulator(ClusterResults.MAX_E2E_NS, new LongMaximum(maxE2eNs));
        }
    }

    /** The sink: latency as every sink, plus notifications per branch and deadline misses. */
    static final class Sink extends LatencySink<Notification> {
        private static final long serialVersionUID = 1L;

        @Override
        void accept(Notification n, long e2eNs) {
            LrOperators.sinkAccept(n, e2eNs);
        }
    }
}
