package moirai.storm;

import java.util.function.Consumer;

import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BoltDeclarer;
import org.apache.storm.topology.TopologyBuilder;

import moirai.jobs.LrGenerator;
import moirai.jobs.LrOperators;
import moirai.jobs.LrRecords.AvgVehicleSpeed;
import moirai.jobs.LrRecords.CountTuple;
import moirai.jobs.LrRecords.Lav;
import moirai.jobs.LrRecords.Line;
import moirai.jobs.LrRecords.Notification;
import moirai.jobs.LrRecords.PositionReport;
import moirai.jobs.Offered;

/**
 * Linear Road as the Lachesis evaluation ran it (moirai's
 * {@code crates/workloads/src/linear_road/lachesis.rs}), the operators of {@link LrOperators} as a
 * Storm topology, the shape the original ran on Storm:
 *
 * <pre>
 * lr-source → lr-dispatcher → lr-average_speed → lr-last_average_speed → lr-toll_notification_las ─┐
 *                           → lr-count_vehicles → lr-toll_notification_cv ─────────────────────────┼→ lr-sink
 *                           → lr-toll_notification_pos ────────────────────────────────────────────┘
 * </pre>
 *
 * Every edge is a shuffle grouping; the sink subscribes to the three toll operators. With the
 * {@link End} markers average_speed emits its last vehicle when its input ends, so the sink
 * receives exactly three tuples per position report.
 */
final class LinearRoad {
    private LinearRoad() {}

    /** Prefix of the component ids. */
    static final String PREFIX = "lr-";

    /** Adds the topology to {@code builder}. */
    static void build(TopologyBuilder builder, LrGenerator.Config traffic, Offered offered, long durationNs, int p) {
        builder.setSpout(PREFIX + "source", new Source(offered, durationNs, traffic), p).setNumTasks(p);
        bolt(builder, "dispatcher", new Dispatcher(), p, "source");
        bolt(builder, "average_speed", new AverageSpeed(), p, "dispatcher");
        bolt(builder, "last_average_speed", new LastAverageSpeed(), p, "average_speed");
        bolt(builder, "toll_notification_las", new TollNotificationLas(), p, "last_average_speed");
        bolt(builder, "count_vehicles", new CountVehicles(), p, "dispatcher");
        bolt(builder, "toll_notification_cv", new TollNotificationCv(), p, "count_vehicles");
        bolt(builder, "toll_notification_pos", new TollNotificationPos(), p, "dispatcher");
        BoltDeclarer sink = builder.setBolt(PREFIX + "sink", new LrSink(), p).setNumTasks(p);
        for (String from : new String[] {"toll_notification_pos", "toll_notification_cv", "toll_notification_las"}) {
            sink.shuffleGrouping(PREFIX + from).allGrouping(PREFIX + from, End.STREAM);
        }
    }

    private static void bolt(TopologyBuilder builder, String name, Bolt<?, ?> bolt, int p, String from) {
        builder.setBolt(PREFIX + name, bolt, p).setNumTasks(p).shuffleGrouping(PREFIX + from)
                .allGrouping(PREFIX + from, End.STREAM);
    }

    /** The generated lines ({@link LrOperators.Lines}), at the offered rate. */
    static final class Source extends OpenLoopSpout<Line> {
        private static final long serialVersionUID = 1L;

        private final LrGenerator.Config traffic;
        private transient LrOperators.Lines lines;

        Source(Offered offered, long durationNs, LrGenerator.Config traffic) {
            super(offered, durationNs);
            this.traffic = traffic;
        }

        @Override
        void openGenerator(int instance, int parallelism) {
            lines = new LrOperators.Lines(traffic, instance, parallelism);
        }

        @Override
        Line next(long n) {
            return lines.next();
        }
    }

    /** dispatcher ({@link LrOperators#dispatch}). */
    static final class Dispatcher extends Bolt<Line, PositionReport> {
        private static final long serialVersionUID = 1L;

        @Override
        void process(Line l, Consumer<PositionReport> out) {
            LrOperators.dispatch(l, out);
        }
    }

    /** average_speed ({@link LrOperators.AverageSpeed}); its last vehicle leaves at the end. */
    static final class AverageSpeed extends Bolt<PositionReport, AvgVehicleSpeed> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.AverageSpeed op;

        @Override
        void open(TopologyContext context) {
            op = new LrOperators.AverageSpeed();
        }

        @Override
        void process(PositionReport p, Consumer<AvgVehicleSpeed> out) {
            op.process(p, out);
        }

        @Override
        void end(Consumer<AvgVehicleSpeed> out) {
            op.end(out);
        }
    }

    /** last_average_speed ({@link LrOperators.LastAverageSpeed}). */
    static final class LastAverageSpeed extends Bolt<AvgVehicleSpeed, Lav> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.LastAverageSpeed op;

        @Override
        void open(TopologyContext context) {
            op = new LrOperators.LastAverageSpeed();
        }

        @Override
        void process(AvgVehicleSpeed a, Consumer<Lav> out) {
            op.process(a, out);
        }
    }

    /** count_vehicles ({@link LrOperators.CountVehicles}). */
    static final class CountVehicles extends Bolt<PositionReport, CountTuple> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.CountVehicles op;

        @Override
        void open(TopologyContext context) {
            op = new LrOperators.CountVehicles();
        }

        @Override
        void process(PositionReport p, Consumer<CountTuple> out) {
            op.process(p, out);
        }
    }

    /** toll_notification_las ({@link LrOperators.TollNotificationLas}). */
    static final class TollNotificationLas extends Bolt<Lav, Notification> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.TollNotificationLas op;

        @Override
        void open(TopologyContext context) {
            op = new LrOperators.TollNotificationLas();
        }

        @Override
        void process(Lav l, Consumer<Notification> out) {
            op.process(l, out);
        }
    }

    /** toll_notification_cv ({@link LrOperators.TollNotificationCv}). */
    static final class TollNotificationCv extends Bolt<CountTuple, Notification> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.TollNotificationCv op;

        @Override
        void open(TopologyContext context) {
            op = new LrOperators.TollNotificationCv();
        }

        @Override
        void process(CountTuple c, Consumer<Notification> out) {
            op.process(c, out);
        }
    }

    /** toll_notification_pos ({@link LrOperators.TollNotificationPos}). */
    static final class TollNotificationPos extends Bolt<PositionReport, Notification> {
        private static final long serialVersionUID = 1L;
        private transient LrOperators.TollNotificationPos op;

        @Override
        void open(TopologyContext context) {
            op = new LrOperators.TollNotificationPos();
        }

        @Override
        void process(PositionReport p, Consumer<Notification> out) {
            op.process(p, out);
        }
    }

    /** The sink: latency as every sink, plus notifications per branch and deadline misses. */
    static final class LrSink extends Sink<Notification> {
        private static final long serialVersionUID = 1L;

        @Override
        void accept(Notification n, long e2eNs) {
            LrOperators.sinkAccept(n, e2eNs);
        }
    }
}
