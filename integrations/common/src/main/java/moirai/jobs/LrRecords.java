package moirai.jobs;

/**
 * The tuples of the Linear Road job (Lachesis shape), as Flink POJOs. A segment
 * {@code (xway, dir, seg)} is packed into one int ({@link #segment}).
 */
public final class LrRecords {
    private LrRecords() {}

    /** The segment key of {@code (xway, dir, seg)}. */
    public static int segment(int xway, int dir, int seg) {
        return (xway << 16) | (dir << 8) | seg;
    }

    /** The segment number of a packed segment. */
    public static int segOf(int segment) {
        return segment & 0xff;
    }

    /** A line of the 15-column input format, as the source hands it to the dispatcher. */
    public static class Line extends Stamped {
        /** The record, without a line break. */
        public String text;

        /** For Flink's POJO serializer. */
        public Line() {}
    }

    /** A type-0 record: where a car is. */
    public static class PositionReport extends Stamped {
        /** Seconds since the start of the simulation. */
        public int time;
        /** The car (VID). */
        public int car;
        /** mph. */
        public int speed;
        /** Expressway. */
        public int xway;
        /** 0 = entrance ramp, 1..3 = travel lanes, 4 = exit ramp. */
        public int lane;
        /** 0 = eastbound, 1 = westbound. */
        public int dir;
        /** Segment, pos / 5280. */
        public int seg;
        /** Feet from the western end. */
        public int pos;

        /** For Flink's POJO serializer. */
        public PositionReport() {}

        /** The minute this report belongs to. */
        public int minute() {
            return time / 60 + 1;
        }

        /** The packed segment of this report. */
        public int segment() {
            return LrRecords.segment(xway, dir, seg);
        }
    }

    /** A vehicle's average speed in one segment and minute (average_speed's output). */
    public static class AvgVehicleSpeed extends Stamped {
        /** Minute. */
        public int minute;
        /** Packed segment. */
        public int segment;
        /** mph. */
        public int speed;

        /** For Flink's POJO serializer. */
        public AvgVehicleSpeed() {}
    }

    /** A segment's latest average velocity for a minute (last_average_speed's output). */
    public static class Lav extends Stamped {
        /** Minute. */
        public int minute;
        /** Packed segment. */
        public int segment;
        /** mph. */
        public int lav;

        /** For Flink's POJO serializer. */
        public Lav() {}
    }

    /** count_vehicles' output: a segment with more than 50 cars, or a progress tuple. */
    public static class CountTuple extends Stamped {
        /** True for a progress tuple (then only {@link #minute} is set). */
        public boolean progress;
        /** Minute. */
        public int minute;
        /** Packed segment. */
        public int segment;
        /** Cars. */
        public int count;

        /** For Flink's POJO serializer. */
        public CountTuple() {}
    }

    /** The dummy notification each toll operator emits per input: branch 0 = pos, 1 = cv, 2 = las. */
    public static class Notification extends Stamped {
        /** Which toll operator. */
        public int branch;

        /** For Flink's POJO serializer. */
        public Notification() {}
    }
}
