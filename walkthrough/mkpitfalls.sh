#!/bin/sh
# walkthrough/mkpitfalls.sh OUT.md - writes walkthrough/pitfalls.md from real
# runs: for every pitfall of ./dflash-pitfall (dflash.h, DFLASH_PITFALLS_LIST),
# on both toy weight sets, the correct run (./dflash) and the run with the
# mistake planted (./dflash-pitfall --pitfall NAME), both traced, then
# `./dflash diff correct port`. Every number in the page comes from those
# runs; the runs are bit-reproducible, so the page is byte-identical on every
# machine (make pitfalls-check holds CI to it).
# Run from the repository root after `make dflash dflash-pitfall weights`.
set -eu
out=${1:?usage: walkthrough/mkpitfalls.sh OUT.md}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the two runs of each set (the walkthrough run, and a random-set run)
args_walkthrough='--weights toy_weights/walkthrough --prompt "The cat sat"'
args_random='--weights toy_weights/random --prompt "A dog saw" --max-new-tokens 8 --ignore-eos'

# pitfall -> where it is planted in dflash.c, and how ports get it wrong
# (this project's own words)
where() {
    case $1 in
    gqa-tile) echo '`attention()`: the KV head of query head h';;
    rope-interleaved) echo '`rope_apply()`: which dimensions rotate together';;
    qk-norm-after-rope) echo '`target_forward()`: q_norm/k_norm around `apply_rotary_pos_emb`';;
    causal-off-by-one) echo '`attention()`: the number of keys query t sees';;
    gelu-mlp) echo '`mlp_block()`: the activation';;
    hidden-off-by-one) echo '`extract_context_feature()`: the hidden_states index';;
    last-hidden-prenorm) echo '`target_forward()`: what is stored as hidden_states[L]';;
    context-input-layernorm) echo '`draft_layer()`: the context rows of `kv_in`';;
    kv-from-residual) echo '`draft_layer()`: the block rows of `kv_in`';;
    query-rope-at-start) echo '`apply_rotary_pos_emb()`: the first cos/sin row of the queries';;
    draft-logits-rows) echo '`draft_forward()`: the rows fed to lm_head';;
    draft-positions-from-0) echo '`draft_forward()`: position_ids';;
    target-cache-not-cropped) echo '`dflash_generate()`: the target cache crop after verification';;
    target-cache-keeps-bonus) echo '`dflash_generate()`: the length the target cache is cropped to';;
    target-hidden-short) echo '`dflash_generate()`: n_ctx, the context rows of the next round';;
    draft-cache-not-cropped) echo '`dflash_generate()`: the draft cache crop after drafting';;
    mask-is-eos) echo '`dflash_generate()`: mask_id';;
    draft-at-temperature) echo '`dflash_generate()`: how block[1:] is chosen from the draft logits';;
    draft-causal) echo '`draft_layer()`: the `causal` argument of `attention()`';;
    esac
}
story() {
    case $1 in
    gqa-tile) echo 'With grouped-query attention each KV head serves H/Hkv consecutive query heads, which is what `repeat_interleave` (or `h / group`) gives. Expanding K and V with `tile`/`repeat` instead pairs query head h with KV head h % Hkv. When Hkv = H the two are the same, so a port checked only on a model without GQA passes; the walkthrough set (Hkv = H = 8) hides it, the random set (Hkv = 4) shows it.';;
    rope-interleaved) echo 'Two RoPE layouts exist: Hugging Face (GPT-NeoX style) rotates dimension i with i + d/2 (`rotate_half`), GPT-J style rotates neighbours (2i, 2i+1). A kernel borrowed from the other family rotates the wrong pairs. Position 0 has angle 0, so a test on one token cannot see it.';;
    qk-norm-after-rope) echo 'Qwen3 normalises every head of q and k (q_norm, k_norm) BEFORE the rotation. Ports written from older Qwen or Llama code, which have no such norm, tend to add it where it is convenient: after RoPE.';;
    causal-off-by-one) echo 'Query t may see keys 0..past+t. A `<` for `<=`, or a mask built without the cache offset, moves the boundary by one; here every prompt token sees one token of its future.';;
    gelu-mlp) echo 'Qwen3 uses SiLU (`hidden_act: silu`). An MLP kernel reused from a GELU model (GPT-2, Gemma) gives values close enough for large inputs to look plausible.';;
    hidden-off-by-one) echo 'output_hidden_states returns L+1 entries with the embedding first, so decoder layer id is entry id+1. Indexing the list by the layer id feeds the draft the output of the layer before: the classic +1 of real ports.';;
    last-hidden-prenorm) echo 'transformers stores the LAST entry of hidden_states after the final norm. A port that collects each decoder layer'"'"'s output itself (a hook per layer) has the pre-norm state there, and DFlash reads it when target_layer_ids includes L-1 (here 11).';;
    context-input-layernorm) echo 'In a draft layer, the context rows C = hidden_norm(fc(target_hidden)) enter k_proj/v_proj as they are; only the block rows go through input_layernorm. Running the usual "norm, then attention" on the concatenation [C; h] normalises C a second time. Where a layer'"'"'s norm weights are 1 this changes almost nothing (the rows are already normalised): on the walkthrough set layer 0 hides it and it shows in layer 1.';;
    kv-from-residual) echo 'The block'"'"'s K/V rows come from X = input_layernorm(h), the rows the queries come from. Concatenating the context with the residual stream h, before the norm, projects unnormalised rows. On the walkthrough set, whose layer-0 norm weights are 1 and whose embedding rows have RMS exactly 1, layer 0 hides it and it shows in layer 1.';;
    query-rope-at-start) echo 'In the draft the keys cover Lc + B positions and the queries only the last B: `apply_rotary_pos_emb` rotates the queries with cos[-q_len:]. Slicing cos[:q_len] rotates them as if the block sat where the context starts.';;
    draft-logits-rows) echo 'Draft output row i predicts block position i+1, so the proposals come from out[1:]. out[:-1] shifts every proposal by one position.';;
    draft-positions-from-0) echo 'The draft'"'"'s positions continue from its cache length. Building them per call from 0 is right in round 1 (the cache is empty) and wrong in every later round, so a one-round test passes.';;
    target-cache-not-cropped) echo 'Verification appends all B block positions to the target cache, but only acc + 1 of them are kept. Without the crop the rejected drafts stay in the cache and every later position is shifted.';;
    target-cache-keeps-bonus) echo 'The crop keeps positions 0..start-1. Cropping to start + 1 keeps the K/V computed at the bonus token'"'"'s position from the rejected draft token that sat there.';;
    target-hidden-short) echo 'The draft'"'"'s new context is target_hidden[:acc+1]: the anchor and the acc accepted tokens (the bonus token is the next anchor). [:acc] drops the last accepted row; with acc = 0 the draft gets no new context at all.';;
    draft-cache-not-cropped) echo 'Each draft forward appends the context rows and the B noise rows; the noise block'"'"'s K/V must be cropped away (crop to start). A port that treats the draft cache like an ordinary decoding cache keeps them: the next block attends to stale noise, and the positions run ahead.';;
    mask-is-eos) echo 'The mask token must be an id the target never produces. Reusing an existing special token for it (pad, eos) makes the empty slots look like output: here the slots filled with the mask read as <eos>, and the run stops after one round.';;
    draft-at-temperature) echo 'DFlash drafts greedily whatever the temperature; the sampling happens in verification. Passing the user'"'"'s temperature to the draft too gives noisier proposals. Invisible at temperature 0, so these runs use --temperature 1 (correct and port alike). The draft'"'"'s draws also consume the random generator the verification samples from: even when every drawn proposal happens to be the argmax, the target'"'"'s samples shift (verify1.sampled). The walkthrough draft is so sure of itself that at temperature 1 nothing changes.';;
    draft-causal) echo 'The draft'"'"'s attention is non-causal: every block position sees the whole block. A port built on a causal decoder layer keeps the causal mask, and earlier block positions lose sight of the later ones.';;
    esac
}

# name + what, from dflash.h: X(ENUM, "name", "what")
sed -n 's/^ *X([A-Z_0-9]*, "\([a-z0-9-]*\)", "\(.*\)") *\\*$/\1|\2/p' dflash.h > "$tmp/list"
[ -s "$tmp/list" ] || { echo "mkpitfalls: no pitfall list found in dflash.h" >&2; exit 1; }

# mean acceptance and output of a run's stdout
summary() {
    acc=$(sed -n 's/.*tokens per round (tau): \([0-9.]*\).*/\1/p' "$1")
    text=$(head -n 1 "$1")
    echo "${acc:--} | ${text}"
}

{
echo '# Porting pitfalls: what goes wrong, and where `dflash diff` says it went wrong'
echo
echo '<!-- generated by walkthrough/mkpitfalls.sh (make pitfalls) from real runs; do not edit -->'
echo
echo 'Each pitfall below is one classic mistake of a port of DFlash, planted in'
echo 'dflash.c as one marked branch `PITFALL(NAME)` at the place where ports go'
echo 'wrong. Only `./dflash-pitfall` (`make dflash-pitfall`, built with'
echo '`-DDFLASH_PITFALLS`) has them; `./dflash` refuses `--pitfall`. Try one:'
echo
echo '```'
echo './dflash --trace correct'
echo './dflash-pitfall --pitfall hidden-off-by-one --trace port'
echo './dflash diff correct port'
echo '```'
echo
echo 'For every pitfall, on both toy sets, the table gives the first departure'
echo 'that `dflash diff correct port` reports (the first tensor, in data-flow'
echo 'order, beyond the tolerance), the mean acceptance length (tokens per'
echo 'verification, bonus included) of the correct run and of the port, and the'
echo 'port'"'"'s output. The runs:'
echo
echo '- walkthrough set: `./dflash '"$args_walkthrough"'` (block 4, 16 new tokens);'
echo '- random set: `./dflash '"$args_random"'`.'
echo
echo 'Some mistakes vanish on one set (the walkthrough set has Hkv = H and layer'
echo 'norm weights of exactly 1): then diff exits 0 and the table says so. That'
echo 'is why a port must be checked on weights that are not special.'
echo
for set in walkthrough random; do   # the correct runs, once
    eval "a=\$args_$set"
    eval "./dflash $a --trace $tmp/c_$set" > "$tmp/c_$set.txt"
done
n=0
while IFS='|' read -r name what; do
    n=$((n + 1))
    extra=
    [ "$name" = draft-at-temperature ] && extra='--temperature 1'
    echo "## $n. \`$name\`"
    echo
    echo "**The mistake.** $what."
    echo
    echo "**How ports get it wrong.** $(story "$name")"
    echo
    echo "**Planted in** $(where "$name")."
    echo
    echo '| weight set | first departure (`dflash diff correct port`) | mean acceptance: correct | port | port output |'
    echo '|---|---|---|---|---|'
    for set in walkthrough random; do
        eval "a=\$args_$set"
        c=$tmp/c_$set
        if [ -n "$extra" ]; then   # a correct run with the same flags
            c=$tmp/c_extra
            rm -rf "$c"
            eval "./dflash $a $extra --trace $c" > "$c.txt"
        fi
        eval "./dflash-pitfall $a $extra --pitfall $name --trace $tmp/p" > "$tmp/p.txt"
        rc=0
        ./dflash diff "$c" "$tmp/p" > "$tmp/d_$set.txt" || rc=$?
        if [ $rc -eq 0 ]; then
            dep='none: every tensor agrees (exit 0)'
        else
            dep=$(sed -n 's/^first departure: \([^: ]*\).*/`\1`/p' "$tmp/d_$set.txt" | head -n 1)
            [ -n "$dep" ] || dep="(exit $rc) $(grep -m1 '^B ' "$tmp/d_$set.txt" || true)"
        fi
        cacc=$(sed -n 's/.*tokens per round (tau): \([0-9.]*\).*/\1/p' "$c.txt")
        echo "| $set | $dep | ${cacc:--} | $(summary "$tmp/p.txt") |"
        rm -rf "$tmp/p"
    done
    echo
    # the first departure's lines (random set: where the mistake shows)
    echo '<details><summary>dflash diff on the random set (first lines)</summary>'
    echo
    echo '```'
    awk '/^differs: /{exit} {print}' "$tmp/d_random.txt" | head -n 12
    echo '```'
    echo
    echo '</details>'
    echo
done < "$tmp/list"
} > "$out"
echo "mkpitfalls: wrote $out ($n pitfalls)"
