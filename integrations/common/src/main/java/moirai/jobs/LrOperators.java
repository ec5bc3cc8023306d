package moirai.jobs;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.function.Consumer;

import moirai.jobs.LrRecords.AvgVehicleSpeed;
import moirai.jobs.LrRecords.CountTuple;
import moirai.jobs.LrRecords.Lav;
import moirai.jobs.LrRecords.Line;
import moirai.jobs.LrRecords.Notification;
import moirai.jobs.LrRecords.PositionReport;

/**
 * Linear Road as the Lachesis evaluation ran it, ported from moirai's
 * {@code crates/workloads/src/linear_road/lachesis.rs}: the logic of the nine operators, engine
 * agnostic (each takes a tuple and hands what it emits to a {@link Consumer}); the Flink and Storm
 * jobs wrap them. A load shape with selectivity 1 everywhere, not a correct Linear Road.
 *
 * <pre>
 * source → dispatcher → average_speed → last_average_speed → toll_notification_las ─┐
 *                     → count_vehicles → toll_notification_cv ──────────────────────┼→ sink
 *                     → toll_notification_pos ──────────────────────────────────────┘
 * </pre>
 *
 * The quirks of the original stay, because they set the load: average_speed and count_vehicles
 * clear their maps on every tuple (count_vehicles only ever emits progress tuples, average_speed
 * emits the previous tuple's vehicle, and its last one at the end of the stream), the three toll
 * operators share no state (every toll toll_notification_pos computes is 0), its LAV threshold is
 * 50 mph, and each toll operator emits one dummy notification per input, so the sink receives
 * exactly three tuples per position report.
 */
public final class LrOperators {
    private LrOperators() {}

    /** The operators' names (moirai's), upstream first; the sink last. */
    public static final String[] NAMES = {"source", "dispatcher", "average_speed", "last_average_speed",
        "toll_notification_las", "count_vehicles", "toll_notification_cv", "toll_notification_pos", "sink"};

    /** The benchmark's deadline for notifications, ns. */
    public static final long DEADLINE_NS = 5_000_000_000L;

    /** Formats a report as a line of the 15-column format (moirai's {@code record_line}). */
    public static String line(PositionReport r) {
        return new StringBuilder(48).append("0,").append(r.time).append(',').append(r.car).append(',')
                .append(r.speed).append(',').append(r.xway).append(',').append(r.lane).append(',').append(r.dir)
                .append(',').append(r.seg).append(',').append(r.pos).append(",-1,-1,-1,-1,-1,-1").toString();
    }

    /**
     * The source's data: generated lines of instance {@code instance} of {@code parallelism}, endless
     * (a lap of {@code traffic.durationS} simulated seconds, then the next with the next seed). Source
     * instance {@code j} of {@code P} simulates its own expressways ({@code j·xways … (j+1)·xways − 1})
     * with seed {@code seed + j}, car ids {@code id·P + j}.
     */
    public static final class Lines {
        private final LrGenerator.Config traffic;
        private final int instance;
        private final int parallelism;
        private int lap;
        private LrGenerator generator;

        public Lines(LrGenerator.Config traffic, int instance, int parallelism) {
            this.traffic = traffic;
            this.instance = instance;
            this.parallelism = parallelism;
            this.generator = new LrGenerator(lapConfig(), 0);
        }

        private LrGenerator.Config lapConfig() {
            LrGenerator.Config c = traffic.copy();
            c.seed = traffic.seed + instance + (long) lap * parallelism;
            return c;
        }

        /** The next line. */
        public Line next() {
            PositionReport r = generator.next();
            if (r == null) {
                lap++;
                generator = new LrGenerator(lapConfig(), generator.nextId());
                r = generator.next();
            }
            r.xway += instance * traffic.xways;
            // Ids only key the operators' maps: wrapping (after billions of cars) is harmless.
            r.car = (int) (((long) r.car * parallelism + instance) & 0x7fffffffL);
            Line l = new Line();
            l.text = line(r);
            return l;
        }
    }

    /** Parses a field and checks its range; the message names the column. */
    private static long field(String[] fields, int column, long min, long max, String line) {
        String text = fields[column].trim();
        long v;
        try {
            v = Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new IllegalStateException("dispatcher: column " + column + " '" + text + "' is not an integer in '"
                    + line + "'");
        }
        if (v < min || v > max) {
            throw new IllegalStateException("dispatcher: column " + column + " " + v + " is out of range " + min
                    + "..=" + max + " in '" + line + "'");
        }
        return v;
    }

    /**
     * dispatcher: splits a line and parses the fields of position reports (type 0); other records
     * are counted and dropped; a malformed line fails the job (the source makes none).
     */
    public static void dispatch(Line l, Consumer<PositionReport> out) {
        String line = l.text;
        String[] fields = line.split(",", -1);
        if (fields.length != 15) {
            throw new IllegalStateException("dispatcher: expected 15 columns, found " + fields.length + " in '"
                    + line + "'");
        }
        long kind = field(fields, 0, Long.MIN_VALUE, Long.MAX_VALUE, line);
        if (kind != 0) {
            Registry.OTHER_RECORDS.increment();
            return;
        }
        PositionReport p = new PositionReport();
        p.time = (int) field(fields, 1, 0, Integer.MAX_VALUE, line);
        p.car = (int) field(fields, 2, 0, Integer.MAX_VALUE, line);
        p.speed = (int) field(fields, 3, 0, 100, line);
        p.xway = (int) field(fields, 4, 0, 65_535, line);
        p.lane = (int) field(fields, 5, 0, LrGenerator.EXIT_LANE, line);
        p.dir = (int) field(fields, 6, 0, 1, line);
        p.seg = (int) field(fields, 7, 0, LrGenerator.SEGMENTS - 1, line);
        p.pos = (int) field(fields, 8, 0, LrGenerator.SEGMENTS * LrGenerator.SEGMENT_FT - 1, line);
        if (p.pos / LrGenerator.SEGMENT_FT != p.seg) {
            throw new IllegalStateException("dispatcher: segment " + p.seg + " does not hold position " + p.pos
                    + " in '" + line + "'");
        }
        p.stampFrom(l);
        Registry.POSITION_REPORTS.increment();
        out.accept(p);
    }

    /**
     * average_speed: per vehicle, the average speed of its reports in one segment and minute; as in
     * the original the map is emitted and cleared on every tuple (with that tuple's timestamps),
     * and the vehicle still held at the end of the stream leaves then ({@link #end}).
     */
    public static final class AverageSpeed {
        /** Vehicle → {sum of speeds, reports, segment}. */
        private final HashMap<Integer, int[]> speeds = new HashMap<>();
        private int minute;
        private PositionReport last;

        private void emitAll(Stamped t, Consumer<AvgVehicleSpeed> out) {
            for (int[] v : speeds.values()) {
                AvgVehicleSpeed a = new AvgVehicleSpeed();
                a.minute = minute;
                a.segment = v[2];
                a.speed = v[0] / v[1];
                a.stampFrom(t);
                out.accept(a);
            }
            speeds.clear();
        }

        public void process(PositionReport p, Consumer<AvgVehicleSpeed> out) {
            emitAll(p, out);
            minute = p.minute();
            speeds.put(p.car, new int[] {p.speed, 1, p.segment()});
            last = p;
        }

        /** The end of the input: the vehicle still held leaves. */
        public void end(Consumer<AvgVehicleSpeed> out) {
            if (last != null) {
                emitAll(last, out);
                last = null;
            }
        }
    }

    /** last_average_speed: per segment, the mean of the (at most five minutes old) vehicle averages. */
    public static final class LastAverageSpeed {
        /** Per segment: {average speed, minute}, oldest first. */
        private final HashMap<Integer, ArrayDeque<int[]>> latest = new HashMap<>();

        public void process(AvgVehicleSpeed a, Consumer<Lav> out) {
            ArrayDeque<int[]> values = latest.computeIfAbsent(a.segment, k -> new ArrayDeque<>());
            values.addLast(new int[] {a.speed, a.minute});
            while (values.size() > 1 && values.peekFirst()[1] + 4 < a.minute) {
                values.pollFirst();
            }
            // The original caps the sum at 11 values "to ensure constant workload".
            long sum = 0;
            int n = 0;
            for (int[] v : values) {
                if (n == 11) {
                    break;
                }
                sum += v[0];
                n++;
            }
            Lav l = new Lav();
            l.minute = a.minute + 1;
            l.segment = a.segment;
            l.lav = (int) (sum / n);
            l.stampFrom(a);
            out.accept(l);
        }
    }

    /** count_vehicles: per segment, reports in the current minute (cleared on every tuple). */
    public static final class CountVehicles {
        private final HashMap<Integer, Integer> counts = new HashMap<>();
        private int minute;

        public void process(PositionReport p, Consumer<CountTuple> out) {
            boolean emitted = false;
            for (Map.Entry<Integer, Integer> e : counts.entrySet()) {
                if (e.getValue() > 50) {
                    emitted = true;
                    CountTuple c = new CountTuple();
                    c.minute = minute;
                    c.segment = e.getKey();
                    c.count = e.getValue();
                    c.stampFrom(p);
                    out.accept(c);
                }
            }
            if (!emitted) {
                CountTuple c = new CountTuple();
                c.progress = true;
                c.minute = minute;
                c.stampFrom(p);
                out.accept(c);
            }
            counts.clear();
            minute = p.minute();
            counts.merge(p.segment(), 1, Integer::sum);
        }
    }

    /** The per-minute buffers every toll operator of the original keeps (and mostly never fills). */
    static final class MinuteBuffers {
        private int minute = -1;
        @SuppressWarnings({"unchecked", "rawtypes"})
        final HashSet<Integer>[] accidents = new HashSet[] {new HashSet<Integer>(), new HashSet<Integer>()};
        @SuppressWarnings({"unchecked", "rawtypes"})
        final HashMap<Integer, Integer>[] counts = new HashMap[] {new HashMap<Integer, Integer>(), new HashMap<>()};
        @SuppressWarnings({"unchecked", "rawtypes"})
        final HashMap<Integer, Integer>[] lavs = new HashMap[] {new HashMap<Integer, Integer>(), new HashMap<>()};

        /** Rotates current into previous when the minute advances; restarts if it goes back. */
        void checkMinute(int m) {
            if (minute >= 0 && m < minute) {
                minute = m;
            } else if (minute >= 0 && m == minute) {
                return;
            } else {
                minute = m;
                rotate(accidents);
                rotate(counts);
                rotate(lavs);
            }
        }

        private static <C extends java.util.Collection<?>> void rotate(C[] pair) {
            C previous = pair[1];
            pair[1] = pair[0];
            previous.clear();
            pair[0] = previous;
        }

        private static <M extends Map<?, ?>> void rotate(M[] pair) {
            M previous = pair[1];
            pair[1] = pair[0];
            previous.clear();
            pair[0] = previous;
        }
    }

    /** toll_notification_las: records LAVs; one dummy notification per input. */
    public static final class TollNotificationLas {
        private final MinuteBuffers buffers = new MinuteBuffers();

        public void process(Lav l, Consumer<Notification> out) {
            out.accept(notification(2, l));
            buffers.checkMinute(l.minute);
            buffers.lavs[0].put(l.segment, l.lav);
        }
    }

    /** toll_notification_cv: records counts; one dummy notification per input. */
    public static final class TollNotificationCv {
        private final MinuteBuffers buffers = new MinuteBuffers();

        public void process(CountTuple c, Consumer<Notification> out) {
            out.accept(notification(1, c));
            buffers.checkMinute(c.minute);
            if (!c.progress) {
                buffers.counts[0].put(c.segment, c.count);
            }
        }
    }

    /** toll_notification_pos: the toll formula, on buffers nothing fills; one notification per input. */
    public static final class TollNotificationPos {
        private final MinuteBuffers buffers = new MinuteBuffers();
        /** Each car's last segment number. */
        private final HashMap<Integer, Integer> segments = new HashMap<>();
        /** Each car's last non-zero toll: {toll, LAV}. */
        private final HashMap<Integer, long[]> lastToll = new HashMap<>();

        public void process(PositionReport p, Consumer<Notification> out) {
            out.accept(notification(0, p));
            buffers.checkMinute(p.minute());
            if (p.lane == LrGenerator.EXIT_LANE) {
                lastToll.remove(p.car);
                return;
            }
            Integer previous = segments.put(p.car, p.seg);
            if (previous != null && previous == p.seg) {
                return;
            }
            int segment = p.segment();
            int lav = buffers.lavs[1].getOrDefault(segment, 0);
            long toll = 0;
            if (lav < 50) {
                int cars = buffers.counts[1].getOrDefault(segment, 0);
                if (cars > 50) {
                    boolean accident = false;
                    for (int i = 0; i <= 4 && !accident; i++) {
                        int seg = p.dir == 0 ? p.seg + i : p.seg - i;
                        if (seg >= 0 && seg <= 255) {
                            accident = buffers.accidents[1].contains(LrRecords.segment(p.xway, p.dir, seg));
                        }
                    }
                    if (!accident) {
                        long excess = cars - 50;
                        toll = Math.min(2 * excess * excess, 0xffffffffL);
                    }
                }
            }
            if (toll != 0) {
                lastToll.put(p.car, new long[] {toll, lav});
            } else {
                lastToll.remove(p.car);
            }
        }
    }

    private static Notification notification(int branch, Stamped from) {
        Notification n = new Notification();
        n.branch = branch;
        n.stampFrom(from);
        return n;
    }

    /** What the sink counts of each notification besides latency: branches, deadline misses. */
    public static void sinkAccept(Notification n, long e2eNs) {
        Registry.LACHESIS_NOTIFICATIONS[n.branch].increment();
        if (e2eNs > DEADLINE_NS) {
            Registry.DEADLINE_MISSES.increment();
        }
        if (e2eNs > Registry.MAX_E2E_NS.get()) {
            Registry.MAX_E2E_NS.accumulateAndGet(e2eNs, Math::max);
        }
    }
}
