#!/usr/bin/env bash
# WordCount in the simulator against the engine on this machine: one sweep measured (moirai bench)
# and simulated (moirai sim, the model of crates/sim/src/wordcount.rs) at the same rates
# (sentences/s in total), side by side with 2026-11-24's table script.
# Run from the repository root with the release binary built; the bench needs a quiet machine.
set -euo pipefail
M=${MOIRAI:-target/release/moirai}
R=$(dirname "$0")
RATES=140000,180000,220000,260000,300000,340000
uptime > "$R/wordcount-bench-load.txt"   # the machine is shared: its load before and after the bench
$M bench wordcount --rates $RATES --duration 8s --reps 2 --compare os --out "$R/wordcount-bench"
uptime >> "$R/wordcount-bench-load.txt"
$M sim wordcount --rates $RATES --duration 8s --reps 2 --compare os --cores 2 --out "$R/wordcount-sim"
python3 "$R/../2026-11-24/sim-validation-table.py" "$R/wordcount-bench" "$R/wordcount-sim" > "$R/wordcount-sim-table.md"
# The same model under the EEVDF scheduler model.
$M sim wordcount --rates $RATES --duration 8s --reps 2 --compare os --cores 2 --scheduler eevdf --out "$R/wordcount-sim-eevdf"
python3 "$R/../2026-11-24/sim-validation-table.py" "$R/wordcount-bench" "$R/wordcount-sim-eevdf" > "$R/wordcount-sim-table-eevdf.md"
