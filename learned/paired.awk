# learned/paired.awk - the difference of two drafts' decoded tau, paired by
# prompt: awk -F '\t' -v B=BLOCK -f learned/paired.awk A.prompts.tsv B.prompts.tsv
# (dflash eval --per-prompt files: T, method, B, prompt, rounds, tokens) prints
#   tau_A  tau_A - tau_B  se  lower  higher  n
# for greedy DFlash at block B: tau = tokens / rounds over all prompts, se the
# standard error of the difference with the ratio estimators linearised
# prompt by prompt (rounds within a prompt are not independent, and the same
# prompts decode both drafts: NOTES.md, "Held-out evaluation"), lower / higher
# the prompts whose own tau is below / above B's. Exit 1 unless both files
# hold the same n >= 2 prompts at block B.
FNR == 1 { f++; next }
$1 == 0 && $2 == "dflash" && $3 == B { r[f, $4] = $5; t[f, $4] = $6; R[f] += $5; T[f] += $6; m[f]++ }
END {
    n = m[1]
    if (n < 2 || m[2] != n) exit 1
    for (g = 1; g <= 2; g++) tau[g] = T[g] / R[g]
    for (i = 0; i < n; i++) {
        if (!((2, i) in r)) exit 1
        e = (t[1, i] - tau[1] * r[1, i]) / R[1] - (t[2, i] - tau[2] * r[2, i]) / R[2]
        ss += e * e
        a = t[1, i] / r[1, i]; b = t[2, i] / r[2, i]
        lo += a < b - 1e-12; hi += a > b + 1e-12
    }
    printf "%.6f %.6f %.6f %d %d %d\n", tau[1], tau[1] - tau[2], sqrt(n / (n - 1) * ss), lo, hi, n
}
