# walkthrough/walkthrough.gdb - the guided gdb session of walkthrough/gdb.md.
#
#   make debug        # ./dflash-debug (-O0 -g3) and the toy weights
#   gdb -batch -x walkthrough/walkthrough.gdb ./dflash-debug
#
# Run it from the repository root: the program (no arguments: the default
# walkthrough run) finds toy_weights/walkthrough there, and this file sources
# walkthrough/ptensor.gdb. `make gdb-check` runs it and checks the output.
# Every step stops in the function that computes it (tbreak: a breakpoint
# that removes itself) and prints the buffers with their shapes. The lines
# starting "==" and "--" and the tables are ours; gdb adds its own location
# lines (addresses, line numbers) around them.

set pagination off
set confirm off
set width 0
source walkthrough/ptensor.gdb

# ---- Step 1: prefill -------------------------------------------------------
tbreak target_forward
run
setwords
printf "\n== Step 1: prefill: target_forward, T = %d tokens at positions %d..%d (cache->len = %d)\n", T, cache->len, cache->len + T - 1, cache->len
ptokens ids T
finish
printf "\n-- back in dflash_generate: tr.hidden_states is [L+1, T, D] = [%d, %d, %d]\n", target->cfg.num_hidden_layers + 1, n, D
printf "hidden_states[4] (the output of layer 3), dims 0..5:\n"
ptensor tr.hidden_states+4*n*D n 6 D
printf "tr.logits of the last prompt position [1, %d]: ", V
pargmaxw tr.logits V

# ---- Step 1: extract_context_feature ----------------------------------------
tbreak extract_context_feature
continue
printf "\n== Step 1: extract_context_feature: %d rows, target_layer_ids = {%d, %d, %d}, read from hidden_states[id + 1]\n", rows, layer_ids[0], layer_ids[1], layer_ids[2]
finish
printf "target_hidden [n, k*D] = [%d, %d]; columns 0..5 (hidden_states[4]):\n", n, n_ids*D
ptensor target_hidden n 6 n_ids*D
printf "columns %d..%d (hidden_states[12], after the final norm):\n", 2*D, 2*D+5
ptensor target_hidden+2*D n 6 n_ids*D

# ---- Steps 2 and 3: the draft's inputs ----------------------------------------
tbreak draft_forward
continue
printf "\n== Steps 2-5: draft_forward: Lc = %d context rows, draft cache->len = %d, block at positions %d..%d:\n", Lc, cache->len, cache->len + Lc, cache->len + Lc + r->B - 1
ptokens block r->B
tbreak draft_layer
continue
printf "\n== Step 2: draft_layer(l = %d) is entered with C ready: r->C = hidden_norm(fc(target_hidden)) is [Lc, D] = [%d, %d]\n", l, Lc, dm->cfg.hidden_size
printf "columns 0..3 (token dims, zero), 36..41, and 511 (the planted context flag):\n"
ptensor r->C Lc 4 dm->cfg.hidden_size
ptensor r->C+36 Lc 6 dm->cfg.hidden_size
ptensor r->C+511 Lc 1 dm->cfg.hidden_size
printf "\n== Step 3: r->noise_embedding = embed_tokens(block) is [B, D] = [%d, %d]; dims 0..5 (<mask> = 1, on = 5):\n", r->B, dm->cfg.hidden_size
ptensor r->noise_embedding r->B 6 dm->cfg.hidden_size
printf "r->pos (position_ids): "
output *r->pos@(Lc + r->B)
printf "\n"

# ---- Step 4: KV injection in draft layer 0 --------------------------------------
tbreak attention if causal == 0
continue
printf "\n== Step 4: attention: T = %d block queries over S = %d keys, %d heads, causal = %d\n", T, S, n_heads, causal
select-frame 1
printf "the caller, draft_layer(l = %d): a->q and a->q_rope are [B, H*d] = [%d, %d]; a->k, a->v, a->k_rope are [Lc+B, Hkv*d] = [%d, %d]\n", l, B, H*d, P, kvd
printf "\n-- 4.1 Q = q_norm(q_proj(H)), head 1 (look-ahead 1): dims 0..1 and 31..32 of each block row\n"
ptensor a->q+1*d B 2 H*d
ptensor a->q+1*d+31 B 2 H*d
printf "\n-- 4.2 K = k_norm(cat[C W_K, H W_K]), head 1: one planted component per key\n"
set $j = 0
while $j < P
  if $j < Lc
    printf "  key %d  position %d  C W_K (context)  k[0] %8.4f  k[16] %8.4f  k[31] %8.4f\n", $j, r->pos[$j], a->k[$j*kvd+d], a->k[$j*kvd+d+16], a->k[$j*kvd+d+31]
  else
    printf "  key %d  position %d  H W_K (block)    k[0] %8.4f  k[16] %8.4f  k[31] %8.4f\n", $j, r->pos[$j], a->k[$j*kvd+d], a->k[$j*kvd+d+16], a->k[$j*kvd+d+31]
  end
  set $j = $j + 1
end
printf "\n-- 4.3 RoPE: r->angles [P, d/2], r->cos and r->sin [P, d]; pair 0 and pair 31\n"
set $p = 0
while $p < P
  printf "  position %d  angle %7.4f  cos %7.4f  sin %7.4f  |  pair 31 angle %.4e\n", r->pos[$p], r->angles[$p*(d/2)], r->cos[$p*d], r->sin[$p*d], r->angles[$p*(d/2)+d/2-1]
  set $p = $p + 1
end
printf "q5 . k2 in head 0 (query row %d = position 5, key %d = position 2):\n", 5 - r->pos[Lc], 2 - r->pos[0]
set $s = (double) 0
set $i = 0
while $i < d
  set $s = $s + (double) a->q_rope[(5 - r->pos[Lc])*H*d + $i] * (double) a->k_rope[(2 - r->pos[0])*kvd + $i]
  set $i = $i + 1
end
printf "  q'_5 . k'_2 = %.4f   score = q'_5 . k'_2 / sqrt(d) = %.4f\n", $s, $s / 8
select-frame 0
finish
printf "\n-- 4.4 back in draft_layer: a->att [H, B, S] = [%d, %d, %d]; head 1 (look-ahead 1):\n", H, B, S
ptensor a->att+1*B*S B S
set $h = 1
while $h <= 3
  printf "head %d (look-ahead %d), query at position %d: ", $h, $h, r->pos[Lc + $h]
  pargmax a->att+($h*B+$h)*S S
  set $h = $h + 1
end
tbreak draft_layer
continue
printf "\n== Step 4.5: draft_layer(l = %d) is entered, so layer 0 is done: r->acts[0].attn_output [B, D], dims 5..10:\n", l
ptensor r->acts[0].attn_output+5 r->B 6 dm->cfg.hidden_size

# ---- Step 5: the draft's logits, and the draft cache crop ----------------------------
tbreak cache_crop
continue
select-frame 1
printf "\n== Step 5: dr.logits [B-1, V] = [%d, %d]; the argmax of each row is the proposal:\n", B - 1, V
set $i = 0
while $i < B - 1
  printf "  row %d (position %d): ", $i, start + 1 + $i
  pargmaxw dr.logits+$i*V V
  set $i = $i + 1
end
select-frame 0
printf "== cache_crop(n = %d) on the cache with %d layers (the draft's): len %d -> %d, only the context K/V stay\n", n, c->n_layers, c->len, n

# ---- Step 6: verification -----------------------------------------------------
tbreak target_forward
continue
printf "\n== Step 6: verification: target_forward, T = %d tokens at positions %d..%d (cache->len = %d)\n", T, cache->len, cache->len + T - 1, cache->len
ptokens ids T
tbreak acceptance_length
continue
printf "\n== Step 6: acceptance_length(block, posterior, B = %d)\n", B
ptokens block B
ptokens posterior B
finish
printf "acceptance_length returned %d\n", $
printf "ri->match   = "
output *ri->match@(B-1)
printf "\nri->cumprod = "
output *ri->cumprod@(B-1)
printf "\n"

# ---- Step 7: the state update -----------------------------------------------------
tbreak cache_crop
continue
printf "\n== Step 7: cache_crop(n = %d) on the cache with %d layers (the target's): len %d -> %d\n", n, c->n_layers, c->len, n
select-frame 1
printf "start = %d; output_ids[%d..%d]:\n", start, ri->start_before, start
ptokens output_ids+ri->start_before start-ri->start_before+1
select-frame 0

# ---- Round 2 ---------------------------------------------------------------------
tbreak draft_forward
continue
printf "\n== Round 2: draft_forward: Lc = %d context rows, draft cache->len = %d, block at positions %d..%d:\n", Lc, cache->len, cache->len + Lc, cache->len + Lc + r->B - 1
ptokens block r->B
tbreak acceptance_length
continue
printf "\n== Round 2: acceptance_length(block, posterior, B = %d)\n", B
ptokens block B
ptokens posterior B
finish
printf "acceptance_length returned %d\n", $
continue
