# tools/runsummary.awk - one dflash train --log as the summary lines the
# training pages are made from (train/mktraining.sh, learned/mkexperiments.sh):
#   run NAME final_loss L [final_acc A] first_loss F SETUP... eval EVAL
#   loss NAME STEP VALUE            (every step, unless -v losses=0)
# L and A: the means of the last 10 steps (0 with no step: --steps 0);
# F: step 1's loss (0 with none); SETUP the log's setup line, EVAL its
# heldout_eval line. -v name=NAME, -v acc=1 for final_acc.
/^setup / { setup = $0; sub(/^setup /, "", setup) }
/^step / { loss[$2] = $4; acc_at[$2] = $6; last = $2 }
/^heldout_eval / { ev = $0; sub(/^heldout_eval /, "", ev) }
END {
    m = 0; a = 0; c = 0
    for (s = last - 9; s <= last; s++) if (s in loss) { m += loss[s]; a += acc_at[s]; c++ }
    if (c == 0) c = 1
    printf "run %s final_loss %.4f", name, m / c
    if (acc) printf " final_acc %.4f", a / c
    printf " first_loss %.4f %s eval %s\n", (1 in loss) ? loss[1] : 0, setup, ev
    if (losses != "0") for (s = 1; s <= last; s++) printf "loss %s %d %s\n", name, s, loss[s]
}
