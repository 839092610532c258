/* explorer/explorer.js: the trace explorer (inlined into the page by explorer/embed;
 * `make js-check` runs node --check on it). The data is the JSON document in
 * <script id="trace-data"> that explorer/explore.c writes. */
'use strict';
window.onerror = function (msg, src, line, col, err) {
  document.getElementById('errors').textContent += 'JavaScript error: ' + msg + ' (line ' + line + ')\n';
};
(function () {
var D = JSON.parse(document.getElementById('trace-data').textContent);
/* the names tensors are found by: the name table's (formats/tracenames.h), written by dflash explore */
var N = D.names;
function reEsc(x) { return x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'); }
var T = {};
D.tensors.forEach(function (t, i) { t.i = i; T[t.n] = t; });
function $(id) { return document.getElementById(id); }
function el(tag, attrs, text) {
  var e = document.createElement(tag);
  if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
var SVGNS = 'http://www.w3.org/2000/svg';  /* a namespace name, never fetched */
function sv(tag, attrs, text) {
  var e = document.createElementNS(SVGNS, tag);
  if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

/* ---- values: ints as they are, floats decoded from base64 (exact) ---- */
function vals(t) {
  if (!t) return null;
  if (t.v) return t.v.map(Number);
  if (t._f) return t._f;
  var bin = atob(t.b), n = bin.length, bytes = new Uint8Array(n);
  for (var i = 0; i < n; i++) bytes[i] = bin.charCodeAt(i);
  var dv = new DataView(bytes.buffer), w = t.w, out = new Array(n / w);
  for (var k = 0; k < out.length; k++) out[k] = w === 4 ? dv.getFloat32(k * 4, true) : dv.getFloat64(k * 8, true);
  t._f = out;
  return out;
}
function get(name) { return vals(T[name]); }
/* the shortest decimal that reads back to the same float32 / float64 */
function exact(t, x) {
  if (x === null || x === undefined) return '-';
  if (t.v || !isFinite(x)) return String(x);
  if (t.w === 8) return String(x);
  for (var p = 1; p <= 9; p++) { var s = x.toPrecision(p); if (Math.fround(Number(s)) === x) return String(Number(s)); }
  return String(x);
}
var V = D.vocab;
/* vocab.txt words, or tokenizer.json tokens decoded as ./dflash decodes them
 * (a byte that is not printable UTF-8 shows as \xNN; null: no such token) */
function word(id) { return V && id >= 0 && id < V.length && V[id] !== null ? V[id] : '#' + id; }
/* a sequence of ids as text: words with spaces, tokens' bytes back to back */
function text(ids) { return D.vk === 'bytes' ? ids.map(word).join('') : ids.map(word).join(' '); }
/* the page's bounds (explorer/explore.c) */
function mib(b) { return (b / 1048576) + ' MiB'; }
function boundsStr() { return 'at most ' + mib(D.lim.page) + ' of values per page, ' + mib(D.lim.tensor) + ' per tensor'; }
function shapeStr(t) { return '[' + t.s.join(', ') + ']'; }
function prod(a) { var p = 1; a.forEach(function (x) { p *= x; }); return p; }

/* ---- glossary: what a name means, by pattern (the manifest's meaning comes first) ---- */
var GLOSS = [
  ['input_ids', 'The prompt as token ids.'],
  ['output_ids', 'The final output: prompt + new tokens (cut after a stop id).'],
  ['*.input_ids', 'Token ids fed to the target in this forward call (prefill: the prompt; verify: the block).'],
  ['*.position_ids', 'Positions of the tokens: RoPE angles and KV-cache slots. For the draft: [draft cache length, start + B): context rows first, then the block.'],
  ['*.hidden_states.*', 'output_hidden_states of the target: [0] is the embedding output, [i] the output of decoder layer i-1, [L] is taken AFTER the final norm.'],
  ['*.target_hidden', 'extract_context_feature: hidden_states[id + 1] for id in target_layer_ids, side by side (k*D columns).'],
  ['*.target_hidden_raw', 'The target context handed to the draft this round: the rows of the previous verification that were accepted (or the prompt, in round 1).'],
  ['*.fc', 'W_fc . target_hidden: k target layers projected back to D.'],
  ['*.hidden_norm', 'C = RMSNorm(W_fc . target_hidden): the context that every draft layer injects as extra keys and values.'],
  ['*.block_output_ids', 'The block entering the draft: the anchor (last accepted token) and B-1 mask ids.'],
  ['*.noise_embedding', 'noise_embedding = embed_tokens(block): the block\'s own input to the draft (the target\'s embedding table).'],
  ['*.rope_angles', 'RoPE angles theta = position * inv_freq, one row per position.'],
  ['*.cos', 'cos of the RoPE angles (cat(angles, angles)).'], ['*.sin', 'sin of the RoPE angles (cat(angles, angles)).'],
  ['*.self_attn.q', 'Queries after q_norm, before RoPE. In the draft: from the block rows only.'],
  ['*.self_attn.k', 'Keys after k_norm, before RoPE. In the draft: context rows (KV injection) then block rows.'],
  ['*.self_attn.v', 'Values. In the draft: context rows then block rows.'],
  ['*.self_attn.q_rope', 'Queries after RoPE.'], ['*.self_attn.k_rope', 'Keys after RoPE.'],
  ['*.self_attn.attn_scores', 'q\'.k\'/sqrt(head_dim) before the softmax, [H, Tq, S].'],
  ['*.self_attn.attn_weights', 'softmax of the scores: row i says how much query i takes from each key, [H, Tq, S]. The draft has no causal mask.'],
  ['*.self_attn.attn_output', 'o_proj(attention @ V): heads side by side, projected back to D.'],
  ['*.self_attn.*', 'An intermediate of the self-attention of this layer.'],
  ['*.mlp.*', 'An intermediate of the MLP (SwiGLU: down(silu(gate) * up)) of this layer.'],
  ['draft*.layers.*', 'The output of this draft decoder layer (the block\'s B hidden states).'],
  ['*.layers.*', 'An intermediate of this decoder layer.'],
  ['*.norm', 'The final RMSNorm of the draft, on the block\'s B rows.'],
  ['*.logits', 'Scores over the vocabulary (lm_head). Draft: one row per masked position; verify: one per block position.'],
  ['draft*.sampled', 'The draft\'s proposal: argmax of each logits row (the draft is always greedy).'],
  ['verify*.sampled', 'The posterior: the target\'s own next token at each block position.'],
  ['prefill.sampled', 'The first new token, sampled from the prefill logits: the first anchor.'],
  ['*.match', 'match = block[1:] == posterior[:-1].'], ['*.cumprod', 'cumprod(match): 1 until the first mismatch.'],
  ['*.acceptance_length', 'sum(cumprod): how many draft tokens the target accepted.']
];
function globRe(p) { return new RegExp('^' + p.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.') + '$'); }
GLOSS.forEach(function (g) { g.push(globRe(g[0])); });
function gloss(name) { for (var i = 0; i < GLOSS.length; i++) if (GLOSS[i][2].test(name)) return GLOSS[i]; return null; }

/* ---- the run, derived from the tensors (each piece optional) ---- */
var run = { prompt: get(N.input_ids) || get('prefill.' + N.input_ids) || [], out: get(N.output_ids), rounds: [] };
var roundNos = {};
D.tensors.forEach(function (t) { var m = /^(draft|verify)(\d+)\./.exec(t.n); if (m) roundNos[+m[2]] = 1; });
var rlist = Object.keys(roundNos).map(Number).sort(function (a, b) { return a - b; });
rlist.forEach(function (r) {
  var d = 'draft' + r + '.', v = 'verify' + r + '.';
  var R = { r: r, blockIn: get(d + N.block_output_ids), prop: get(d + N.sampled),
    block: get(v + N.input_ids), post: get(v + N.sampled), match: get(v + N.match),
    cum: get(v + N.cumprod), dpos: get(d + N.position_ids), vpos: get(v + N.position_ids) };
  var a = get(v + N.acceptance_length);
  R.acc = a ? a[0] : (R.cum ? R.cum.reduce(function (s, x) { return s + x; }, 0) : null);
  R.B = R.blockIn ? R.blockIn.length : R.block ? R.block.length : R.prop ? R.prop.length + 1 : null;
  R.start = R.vpos ? R.vpos[0] : (R.dpos && R.B ? R.dpos[R.dpos.length - R.B] : null);
  var th = T[d + N.target_hidden_raw];
  R.Lc = th ? th.s[0] : (R.dpos && R.B ? R.dpos.length - R.B : null);
  R.dcache = R.dpos ? R.dpos[0] : null;
  if (!R.block && R.blockIn && R.prop) R.block = [R.blockIn[0]].concat(R.prop);
  R.hasDraft = D.tensors.some(function (t) { return t.n.indexOf('draft' + r + '.') === 0; });
  R.hasVerify = D.tensors.some(function (t) { return t.n.indexOf('verify' + r + '.') === 0; });
  run.rounds.push(R);
});
var B = run.rounds.length ? run.rounds[0].B : null;
var ps = get('prefill.' + N.sampled);
run.first = ps ? ps[0] : null;
/* the token at each position, as far as the trace tells */
function tokenAt(p) {
  if (run.out && p < run.out.length) return run.out[p];
  if (p < run.prompt.length) return run.prompt[p];
  return null;
}

/* ---- views: overview, prefill, per round draft / verify / update, output (the
 * page's navigation; "Step 1..7" are the walkthrough's seven steps of a round) ---- */
var STEPS = [{ k: 'overview', title: 'Overview of the run' }];
if (T['prefill.' + N.input_ids] || T['prefill.' + N.target_hidden] || T['prefill.' + N.logits]) STEPS.push({ k: 'prefill', title: 'Prefill', cards: [1] });
run.rounds.forEach(function (R) {
  if (R.hasDraft) STEPS.push({ k: 'draft', r: R.r, title: 'Round ' + R.r + ': the draft proposes', cards: [2, 3, 4, 5] });
  if (R.hasVerify) {
    STEPS.push({ k: 'verify', r: R.r, title: 'Round ' + R.r + ': the target verifies', cards: [6] });
    STEPS.push({ k: 'update', r: R.r, title: 'Round ' + R.r + ': the update', cards: [7] });
  }
});
STEPS.push({ k: 'final', title: 'The output', cards: [] });

var CARDS = [
  null,
  { t: 'Step 1: prefill, and the target\'s hidden states', f: 'hidden_states = target(prompt);   target_hidden = concat_j hidden_states[target_layer_ids[j] + 1]',
    c: 'target_forward, extract_context_feature (dflash.c)', pat: ['prefill.*'] },
  { t: 'Step 2: projection and normalisation to C', f: 'C = RMSNorm(W_fc \u00b7 target_hidden)   (Lc rows, D columns)',
    c: 'draft_forward: matmul with fc, rmsnorm_rows with hidden_norm (dflash.c)', pat: ['draft#.target_hidden_raw', 'draft#.fc', 'draft#.hidden_norm'] },
  { t: 'Step 3: the block', f: 'block = [anchor, <mask> \u00d7 (B\u22121)];   noise_embedding = embed_tokens(block);   positions start .. start+B\u22121',
    c: 'dflash_generate (the round loop), draft_forward (dflash.c)', pat: ['draft#.block_output_ids', 'draft#.noise_embedding', 'draft#.position_ids'] },
  { t: 'Step 4: KV injection, RoPE and attention (every draft layer)', f: 'X = input_layernorm(h);  Q = QNorm(X W_Q);  K = KNorm([C; X] W_K);  V = [C; X] W_V;  A = softmax(RoPE(Q) RoPE(K)\u1d40 / \u221ad)  (no causal mask);  out = A V W_O + residual, then the MLP',
    c: 'draft_layer, apply_rotary_pos_emb, attention(causal = 0) (dflash.c)', pat: ['draft#.rope_angles', 'draft#.layers.0.self_attn.*', 'draft#.layers.*'] },
  { t: 'Step 5: output and logits', f: 'logits = lm_head(RMSNorm(h)[1:]);   proposal = argmax(logits)  (the draft is greedy)',
    c: 'draft_forward, argmax (dflash.c)', pat: ['draft#.norm', 'draft#.logits', 'draft#.sampled'] },
  { t: 'Step 6: verification and acceptance', f: 'posterior = sample(target(block));   match = block[1:] == posterior[:\u22121];   acceptance = \u03a3 cumprod(match)',
    c: 'target_forward, sample_row, acceptance_length (dflash.c)', pat: ['verify#.input_ids', 'verify#.logits', 'verify#.sampled', 'verify#.match', 'verify#.cumprod', 'verify#.acceptance_length'] },
  { t: 'Step 7: the state update', f: 'output[start .. start+acc] = block[:acc+1];  output[start+acc+1] = posterior[acc];  start += acc+1;  crop(target cache, start);  crop(draft cache, old start);  target_hidden = verify.target_hidden[:acc+1]',
    c: 'dflash_generate (end of the round loop), cache_crop (dflash.c)', pat: ['verify#.target_hidden', 'draft#+1.target_hidden_raw'] }
];

var cur = 0;
function tensorLink(name) {
  var a = el('a', { 'class': 't' }, name);
  a.onclick = function () { showTensor(name); $('tensors').scrollIntoView(); };
  return a;
}
function tokSpan(id, cls) { var s = el('span', { 'class': 'tok' + (cls ? ' ' + cls : ''), title: 'id ' + id }, word(id)); return s; }
function toks(arr, clsf) { var d = el('span'); (arr || []).forEach(function (id, i) { d.appendChild(tokSpan(id, clsf ? clsf(i) : '')); }); return d; }
function listOrDash(a) { return a ? '[' + a.join(', ') + ']' : '\u2014'; }

function renderSummary() {
  var s = $('summary'); s.textContent = '';
  var parts = [];
  s.appendChild(document.createTextNode('prompt '));
  s.appendChild(el('code', null, text(run.prompt)));
  if (run.out) {
    s.appendChild(document.createTextNode('  \u2192  output '));
    s.appendChild(el('code', { id: 'output-text' }, text(run.out)));
  }
  var accs = run.rounds.map(function (R) { return R.acc; });
  var info = ' \u00b7 block size ' + (B === null ? '?' : B) + ' \u00b7 ' + run.rounds.length + ' rounds';
  if (accs.length && accs.every(function (x) { return x !== null; }))
    info += ' \u00b7 tokens per round (tau, accepted + bonus) ' + (accs.reduce(function (a, b) { return a + b + 1; }, 0) / accs.length).toFixed(2);
  info += ' \u00b7 ' + D.tensors.length + ' tensors';
  s.appendChild(document.createTextNode(info));
  /* what the page bound left out, in total (each tensor says its own part) */
  s.appendChild(el('div', { id: 'bounds', 'class': 'sum' }, D.lim.left ?
    'This page leaves out ' + D.lim.left + ' of ' + D.lim.values + ' values: ' + D.lim.cut + ' tensors keep only their first values (' + boundsStr() + '); the .npy files have them all.' :
    'Every value of every tensor is on this page (' + D.lim.values + ' values; the bound: ' + boundsStr() + ').'));
  parts = null;
}

/* ---- the timeline: positions across, one row of draft and one of target per round ---- */
function renderTimeline() {
  var tl = $('tl'); tl.textContent = '';
  var maxPos = run.prompt.length + 1;
  if (run.out) maxPos = Math.max(maxPos, run.out.length);
  run.rounds.forEach(function (R) { if (R.start !== null && R.B) maxPos = Math.max(maxPos, R.start + R.B + 1); });
  var cw = Math.max(30, Math.min(60, Math.floor(900 / maxPos))), lw = 120, rh = 20;
  var rows = 1 + 2 * run.rounds.length + (run.out ? 1 : 0);
  var W = lw + cw * maxPos + 330, H = 18 + rows * (rh + 2) + 6;
  var g = sv('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, id: 'timeline-svg' });
  for (var p = 0; p < maxPos; p++) g.appendChild(sv('text', { x: lw + p * cw + cw / 2, y: 12, 'font-size': 10, 'text-anchor': 'middle', fill: '#777' }, p));
  var y = 18;
  function cell(p, id, fill, tip) {
    var x = lw + p * cw;
    var r = sv('rect', { x: x + 1, y: y, width: cw - 2, height: rh, fill: fill, stroke: '#999', rx: 3 });
    r.appendChild(sv('title', null, tip));
    g.appendChild(r);
    var w = id === null ? '?' : word(id);
    var maxc = Math.max(2, Math.floor((cw - 4) / 6.5));
    if (w.length > maxc) w = w.slice(0, maxc - 1) + '\u2026';
    var t = sv('text', { x: x + cw / 2, y: y + 14, 'font-size': 11, 'text-anchor': 'middle' }, w);
    t.appendChild(sv('title', null, tip));
    g.appendChild(t);
  }
  function label(text, stepIdx, bold) {
    var t = sv('text', { x: 4, y: y + 14, 'font-size': 12, 'font-weight': bold ? 'bold' : 'normal', cursor: 'pointer' }, text);
    t.onclick = function () { go(stepIdx); };
    g.appendChild(t);
  }
  function note(text) { g.appendChild(sv('text', { x: lw + maxPos * cw + 8, y: y + 14, 'font-size': 11, fill: '#333' }, text)); }
  function stepOf(k, r) { for (var i = 0; i < STEPS.length; i++) if (STEPS[i].k === k && STEPS[i].r === r) return i; return 0; }
  var s = STEPS[cur];
  function hl(on) { if (on) g.appendChild(sv('rect', { x: 0, y: y - 1, width: W, height: rh + 2, fill: '#ffe9a8', opacity: 0.6 })); }
  hl(s.k === 'prefill');
  label('prefill', stepOf('prefill'), s.k === 'prefill');
  run.prompt.forEach(function (id, p) { cell(p, id, '#d9d9d9', 'prompt, position ' + p + ': ' + word(id) + ' (id ' + id + ')'); });
  if (run.first !== null) cell(run.prompt.length, run.first, '#fdae6b', 'sampled at prefill (the first anchor), position ' + run.prompt.length + ': ' + word(run.first));
  note('target cache 0 \u2192 ' + run.prompt.length);
  y += rh + 2;
  run.rounds.forEach(function (R) {
    var on = s.r === R.r;
    hl(on && s.k === 'draft');
    label('round ' + R.r + (R.hasDraft ? ' draft' : ' block'), stepOf(R.hasDraft ? 'draft' : 'verify', R.r), on);
    if (R.start !== null && R.B) {
      for (var i = 0; i < R.B; i++) {
        var id = R.block ? R.block[i] : (R.blockIn ? R.blockIn[i] : null);
        var fill = i === 0 ? '#fff7bc' : !R.cum ? '#eee' : (R.cum[i - 1] ? '#c7e9c0' : '#fcbba1');
        var what = i === 0 ? 'anchor' : 'draft proposal ' + i + (R.cum ? (R.cum[i - 1] ? ' (accepted)' : ' (rejected)') : '');
        cell(R.start + i, id, fill, 'round ' + R.r + ', position ' + (R.start + i) + ': ' + what + ': ' + (id === null ? '?' : word(id) + ' (id ' + id + ')'));
      }
    }
    if (R.hasDraft) note('keys: cache ' + (R.dcache === null ? '?' : R.dcache) + ' + Lc ' + (R.Lc === null ? '?' : R.Lc) + ' + B ' + (R.B || '?') + '; draft cache \u2192 ' + (R.start === null ? '?' : R.start));
    else note('no draft in this trace' + (R.B === 1 ? ' (block size 1: plain decoding)' : ''));
    y += rh + 2;
    hl(on && s.k !== 'draft');
    label('round ' + R.r + ' target', stepOf('verify', R.r), on);
    if (R.start !== null && R.post) {
      R.post.forEach(function (id, i) {
        var acc = R.acc === null ? -1 : R.acc;
        var fill = i < acc ? '#c7e9c0' : i === acc ? '#fdae6b' : '#ffffff';
        var what = i < acc ? 'agrees with the draft' : i === acc ? 'the bonus token (next anchor)' : 'discarded';
        cell(R.start + i + 1, id, fill, 'round ' + R.r + ', target posterior at position ' + (R.start + i + 1) + ': ' + word(id) + ' (id ' + id + '), ' + what);
      });
    }
    note('accepted ' + (R.acc === null ? '?' : R.acc) + '; start ' + R.start + ' \u2192 ' + (R.acc === null ? '?' : R.start + R.acc + 1) + ' (= target cache)');
    y += rh + 2;
  });
  if (run.out) {
    hl(s.k === 'final');
    label('output', stepOf('final'), s.k === 'final');
    run.out.forEach(function (id, p) { cell(p, id, p < run.prompt.length ? '#d9d9d9' : '#dbe9f6', 'output position ' + p + ': ' + word(id) + ' (id ' + id + ')'); });
    y += rh + 2;
  }
  tl.appendChild(g);
  tl.appendChild(exportLink('export-timeline', 'timeline.svg', function () { return $('timeline-svg'); }));
  tl.appendChild(el('div', { 'class': 'note' }, 'grey: prompt \u00b7 yellow: anchor \u00b7 green: accepted \u00b7 red: rejected \u00b7 orange: bonus token from the target \u00b7 click a row label to go to that view; hover a cell for its token id'));
}

/* ---- the per-round table (ids, exact) ---- */
function renderRounds() {
  var d = $('rounds'); d.textContent = '';
  var tb = el('table', { 'class': 'kv', id: 'rounds-table' });
  var hr = el('tr');
  ['round', 'start', 'block into the draft', 'draft proposal', 'target posterior', 'match', 'cumprod', 'acceptance length', 'context rows Lc', 'draft cache', 'target cache'].forEach(function (h) { hr.appendChild(el('th', null, h)); });
  tb.appendChild(hr);
  run.rounds.forEach(function (R) {
    var tr = el('tr', { id: 'round-' + R.r });
    if (STEPS[cur].r === R.r) tr.className = 'cur';
    function td(x, id) { var c = el('td', id ? { id: id } : null); if (typeof x === 'string' || typeof x === 'number') c.textContent = x; else c.appendChild(x); tr.appendChild(c); }
    td(R.r); td(R.start === null ? '\u2014' : R.start);
    td(R.blockIn ? toks(R.blockIn, function (i) { return i ? '' : 'anchor'; }) : '\u2014');
    td(R.prop ? toks(R.prop, function (i) { return R.cum ? (R.cum[i] ? 'ok' : 'no') : ''; }) : '\u2014');
    td(R.post ? toks(R.post, function (i) { return i === R.acc ? 'bonus' : ''; }) : '\u2014');
    td(listOrDash(R.match)); td(listOrDash(R.cum));
    td(R.acc === null ? '\u2014' : String(R.acc), 'acc-' + R.r);
    td(R.Lc === null ? '\u2014' : R.Lc);
    td(R.dcache === null ? '\u2014' : R.dcache + ' \u2192 ' + (R.dcache + (R.dpos ? R.dpos.length : 0)) + ' \u2192 crop ' + R.start);
    td(R.start === null ? '\u2014' : R.start + ' \u2192 ' + (R.start + (R.B || 0)) + ' \u2192 crop ' + (R.acc === null ? '?' : R.start + R.acc + 1));
    tb.appendChild(tr);
  });
  d.appendChild(tb);
  var o = el('div', { style: 'margin-top: 6px' });
  o.appendChild(document.createTextNode('output ids: '));
  o.appendChild(el('span', { id: 'output-ids', 'class': 'mono' }, run.out ? run.out.join(' ') : '\u2014'));
  o.appendChild(document.createTextNode('   acceptance lengths: '));
  o.appendChild(el('span', { id: 'acceptance-lengths', 'class': 'mono' }, run.rounds.map(function (R) { return R.acc; }).join(' ')));
  d.appendChild(o);
}

/* ---- the current step ---- */
function patNames(pats, r) {
  var out = [];
  pats.forEach(function (p) {
    var q = p.replace('#+1', String(r + 1)).replace('#', String(r));
    var re = globRe(q);
    D.tensors.forEach(function (t) { if (re.test(t.n) && out.indexOf(t.n) < 0) out.push(t.n); });
  });
  return out;
}
function renderCards() {
  var d = $('cards'); d.textContent = '';
  var s = STEPS[cur], r = s.r || (run.rounds.length ? run.rounds[0].r : 1);
  for (var k = 1; k <= 7; k++) {
    var C = CARDS[k], on = s.cards && s.cards.indexOf(k) >= 0;
    var c = el('div', { 'class': 'card' + (on ? ' on' : ''), id: 'card-' + k });
    c.appendChild(el('b', null, C.t));
    c.appendChild(el('div', { 'class': 'f' }, C.f));
    c.appendChild(el('div', { 'class': 'c' }, 'C: ' + C.c));
    if (on) {
      var names = patNames(C.pat, r).slice(0, 14);
      if (names.length) {
        var l = el('div', { 'class': 'c' }, 'tensors (round ' + r + '): ');
        names.forEach(function (n, i) { if (i) l.appendChild(document.createTextNode(', ')); l.appendChild(tensorLink(n)); });
        c.appendChild(l);
      }
    }
    d.appendChild(c);
  }
}
function renderStep() {
  var s = STEPS[cur];
  $('stepno').textContent = 'view ' + (cur + 1) + ' / ' + STEPS.length + ':';
  $('steptitle').textContent = s.title;
  $('stephead').textContent = s.title;
  $('prev').disabled = cur === 0; $('next').disabled = cur === STEPS.length - 1;
  var b = $('stepbody'); b.textContent = '';
  function p(parts) {
    var e = el('p');
    parts.forEach(function (x) { e.appendChild(typeof x === 'string' ? document.createTextNode(x) : x); });
    b.appendChild(e);
  }
  var R = null;
  run.rounds.forEach(function (x) { if (x.r === s.r) R = x; });
  if (s.k === 'overview') {
    p(['This page is generated by ', el('code', null, 'dflash explore'), ' from a trace directory (one .npy per tensor, listed in trace.jsonl). Every number is the trace\'s own value; hover any cell for it. Go through the run view by view with the buttons or the arrow keys.']);
    p(['A DFlash round: the target\'s hidden states of the accepted tokens become the context C; the draft fills a block of B\u22121 masks after the anchor in one forward pass, attending to C (KV injection) and to the block; the target verifies the whole block in one forward pass and keeps the longest agreeing prefix plus one token of its own.']);
  } else if (s.k === 'prefill') {
    var th = T['prefill.target_hidden'];
    p(['The target reads the prompt ', toks(run.prompt, function () { return 'prompt'; }), ' at positions 0..' + (run.prompt.length - 1) + ' and samples the first new token ',
      run.first === null ? '?' : tokSpan(run.first, 'bonus'), ' (', tensorLink('prefill.sampled'), '). ',
      th ? 'It hands ' + shapeStr(th) + ' of hidden states to the draft (' : '', th ? tensorLink('prefill.target_hidden') : '', th ? ').' : '']);
  } else if (R && s.k === 'draft') {
    p(['The block ', R.blockIn ? toks(R.blockIn, function (i) { return i ? '' : 'anchor'; }) : '?', ' at positions ' + R.start + '..' + (R.start + R.B - 1) +
      '. The draft attends over ' + (R.dcache === null ? '?' : R.dcache) + ' cached context keys + ' + (R.Lc === null ? '?' : R.Lc) + ' new context rows (KV injection) + ' + R.B + ' block keys, and proposes ',
      R.prop ? toks(R.prop) : '?', ' (', tensorLink('draft' + R.r + '.sampled'), ').']);
    p(['position_ids ', el('code', null, listOrDash(R.dpos)), ': the context rows first, the block last (queries use the last B).']);
  } else if (R && s.k === 'verify') {
    p(['The target reads the block ', R.block ? toks(R.block, function (i) { return i ? '' : 'anchor'; }) : '?', ' at positions ', el('code', null, listOrDash(R.vpos)), ' and its posterior is ',
      R.post ? toks(R.post) : '?', '.']);
    p(['match ', el('code', null, listOrDash(R.match)), ', cumprod ', el('code', null, listOrDash(R.cum)), ': acceptance length ', el('b', null, String(R.acc)), ' of ' + (R.B - 1) + ' proposals.']);
  } else if (R && s.k === 'update') {
    var acc = R.acc;
    p(['Accepted: the anchor and ' + acc + ' proposal(s) ', R.block ? toks(R.block.slice(0, acc + 1)) : '?', ', then the target\'s bonus token ', R.post ? tokSpan(R.post[acc], 'bonus') : '?',
      '. start ' + R.start + ' \u2192 ' + (R.start + acc + 1) + '; the target cache is cropped to ' + (R.start + acc + 1) + ' positions; the draft cache keeps the context only (' + R.start + ' positions).']);
    p(['The next round\'s context is the first ' + (acc + 1) + ' rows of ', tensorLink('verify' + R.r + '.target_hidden'), '.']);
  } else if (s.k === 'final') {
    p(['Output ', run.out ? toks(run.out, function (i) { return i < run.prompt.length ? 'prompt' : ''; }) : '?', ' (', tensorLink('output_ids'), ').']);
    var n = run.out ? run.out.length - run.prompt.length : 0;
    p([n + ' new tokens from ' + (run.rounds.length + 1) + ' target forward passes (prefill + ' + run.rounds.length + ' verifications); target-only decoding needs one per token.']);
  }
  var names = D.tensors.filter(function (t) {
    if (s.k === 'prefill') return t.ph === 'prefill';
    if (s.k === 'draft') return t.ph === 'draft' && t.r === s.r;
    if (s.k === 'verify' || s.k === 'update') return t.ph === 'verify' && t.r === s.r;
    if (s.k === 'final') return t.ph === 'final';
    return false;
  }).map(function (t) { return t.n; });
  if (names.length) {
    var l = el('details');
    l.appendChild(el('summary', null, names.length + ' tensors of this view'));
    names.forEach(function (n, i) { if (i) l.appendChild(document.createTextNode(' ')); l.appendChild(tensorLink(n)); });
    b.appendChild(l);
  }
  renderCards();
  renderTimeline();
  renderRounds();
  /* the attention viewer follows the view */
  var want = s.k === 'prefill' ? 'prefill' : s.k === 'draft' ? 'draft' + s.r : (s.k === 'verify' || s.k === 'update') ? 'verify' + s.r : null;
  if (want && attnGroups[want]) { attn.g = want; if (attn.layer >= attnGroups[want].length) attn.layer = 0; renderAttn(); }
}
function go(i) { cur = Math.max(0, Math.min(STEPS.length - 1, i)); renderStep(); }

/* ---- attention heatmaps ---- */
var attnGroups = {}, attnOrder = [];
var ATTN_RE = new RegExp('^(.*)\\.layers\\.(\\d+)\\.' + reEsc(N.attn_weights) + '$');
var HEADS_RE = new RegExp('\\.(' + N.heads.map(reEsc).join('|') + ')$');
D.tensors.forEach(function (t) {
  var m = ATTN_RE.exec(t.n);
  if (!m || t.s.length !== 3) return;
  if (!attnGroups[m[1]]) { attnGroups[m[1]] = []; attnOrder.push(m[1]); }
  attnGroups[m[1]][+m[2]] = t.n;
});
attnOrder.forEach(function (g) { attnGroups[g] = attnGroups[g].filter(function (x) { return x; }); });
var attn = { g: attnOrder.length ? (attnGroups.draft1 ? 'draft1' : attnOrder[0]) : null, layer: 0, head: 0 };
function blues(v) {
  v = Math.max(0, Math.min(1, v));
  var a = [247, 251, 255], b = [8, 48, 107];
  return 'rgb(' + a.map(function (x, i) { return Math.round(x + (b[i] - x) * Math.pow(v, 0.6)); }).join(',') + ')';
}
/* A heatmap shows at most WIN x WIN cells of one head (the window at rows
 * q0.., columns k0..); the pager moves the window. Every loop runs over
 * the window and over the values the page holds (t.k), never over a shape. */
var WIN = 48;
/* what the rows and columns of one attention tensor are, inside the window */
function attnAxes(g, t, q0, k0) {
  var Tq = t.s[1], S = t.s[2], m = /^(prefill|draft|verify)(\d*)$/.exec(g), R = null;
  var q1 = Math.min(Tq, q0 + WIN), k1 = Math.min(S, k0 + WIN);
  var ax = { q: [], k: [], bounds: [], kind: m ? m[1] : 'other' };
  if (m && m[2]) run.rounds.forEach(function (x) { if (x.r === +m[2]) R = x; });
  for (var j = k0; j < k1; j++) ax.k.push({ pos: j, tok: tokenAt(j) });
  function key(p, tok) { if (p >= k0 && p < k1) ax.k[p - k0].tok = tok; }
  function bound(at, label, dash) { if (at >= k0 && at <= k1) ax.bounds.push({ at: at - k0, label: label, dash: dash }); }
  if (ax.kind === 'draft' && R && R.start !== null) {
    for (var i = q0; i < q1; i++) ax.q.push({ pos: R.start + i, tok: R.blockIn ? R.blockIn[i] : null });
    for (var b = 0; b < R.B; b++) key(S - R.B + b, R.blockIn ? R.blockIn[b] : null);
    if (R.dcache) bound(R.dcache, 'cached | new context', '4,3');
    bound(S - R.B, 'context | block', null);
  } else if (ax.kind === 'verify' && R && R.start !== null) {
    for (var i2 = q0; i2 < q1; i2++) ax.q.push({ pos: R.start + i2, tok: R.block ? R.block[i2] : null });
    for (var b2 = 0; R.block && b2 < R.block.length; b2++) key(R.start + b2, R.block[b2]);
    bound(R.start, 'cache | block', null);
  } else {
    for (var i3 = q0; i3 < q1; i3++) ax.q.push({ pos: S - Tq + i3, tok: tokenAt(S - Tq + i3) });
  }
  return ax;
}
/* four significant digits, for a cell: 0.8542, 12.35, 1.522e-4 */
function sig4(x) {
  if (!isFinite(x)) return String(x);
  if (x === 0) return '0';
  var a = Math.abs(x);
  if (a < 1e-3 || a >= 1e5) return x.toExponential(3).replace(/\.?0+e/, 'e').replace('e+', 'e');
  return String(Number(x.toPrecision(4)));
}
function heatmap(t, h, cell, withLabels, ax, q0, k0) {
  var Tq = t.s[1], S = t.s[2], v = vals(t), off = h * Tq * S;
  var nq = Math.min(Tq - q0, WIN), nk = Math.min(S - k0, WIN);
  var lx = withLabels ? 96 : 0, ty = withLabels ? 40 : 0;
  var W = lx + nk * cell + 4, H = ty + nq * cell + (withLabels ? 34 : 4);
  var g = sv('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H });
  for (var i = q0; i < q0 + nq; i++) for (var j = k0; j < k0 + nk; j++) {
    var flat = off + i * S + j;
    if (flat >= t.k) break;   /* beyond the values on this page */
    var x = v[flat], cx = lx + (j - k0) * cell, cy = ty + (i - q0) * cell;
    var r = sv('rect', { x: cx, y: cy, width: cell, height: cell, fill: blues(x) });
    if (withLabels) {
      r.setAttribute('class', 'ac'); r.setAttribute('data-q', i); r.setAttribute('data-k', j);
      var tip = t.n + '[' + h + ', ' + i + ', ' + j + '] = ' + exact(t, x);
      r.appendChild(sv('title', null, tip));
      r.onmouseenter = (function (tip) { return function () { $('attnreadout').textContent = tip; }; })(tip);
      g.appendChild(r);
      if (cell >= 44) g.appendChild(sv('text', { x: cx + cell / 2, y: cy + cell / 2 + 4, 'font-size': 9, 'text-anchor': 'middle', fill: x > 0.55 ? '#fff' : '#000', 'pointer-events': 'none' }, sig4(x)));
    } else g.appendChild(r);
  }
  if (withLabels) {
    ax.q.forEach(function (q, i) { g.appendChild(sv('text', { x: lx - 4, y: ty + i * cell + cell / 2 + 4, 'font-size': 11, 'text-anchor': 'end' }, (q.tok === null || q.tok === undefined ? '' : word(q.tok) + ' ') + '@' + q.pos)); });
    ax.k.forEach(function (k, j) {
      var tx = lx + j * cell + cell / 2;
      g.appendChild(sv('text', { x: tx, y: ty - 18, 'font-size': 10, 'text-anchor': 'middle', fill: '#777' }, k.pos));
      var w = k.tok === null || k.tok === undefined ? '' : word(k.tok);
      var maxc = Math.max(2, Math.floor(cell / 6)); if (w.length > maxc) w = w.slice(0, maxc - 1) + '\u2026';
      g.appendChild(sv('text', { x: tx, y: ty - 5, 'font-size': 10, 'text-anchor': 'middle' }, w));
    });
    ax.bounds.forEach(function (b, n) {
      var x = lx + b.at * cell;
      var ln = sv('line', { x1: x, y1: ty - 2, x2: x, y2: ty + nq * cell + 4, stroke: '#d62728', 'stroke-width': 2 });
      if (b.dash) ln.setAttribute('stroke-dasharray', b.dash);
      g.appendChild(ln);
      g.appendChild(sv('text', { x: x + (n ? 3 : -3), y: ty + nq * cell + 16 + 12 * (n % 2), 'font-size': 10, fill: '#d62728', 'text-anchor': n ? 'start' : 'end' }, b.label));
    });
  }
  return g;
}
/* A pager: "LABEL [<] [n] [>] of N" over pages 0..N-1 (a number field, so
 * its size does not follow N); onset(page) redraws. */
function pager(id, label, page, pages, onset) {
  var d = el('span', { 'class': 'pager' });
  d.appendChild(document.createTextNode(label + ' '));
  var prev = el('button', { id: id + '-prev', title: 'previous' }, '\u25c0');
  var inp = el('input', { id: id, type: 'number', min: 0, max: pages - 1, value: page, style: 'width: 5em' });
  var next = el('button', { id: id + '-next', title: 'next' }, '\u25b6');
  function set(p) { p = Math.max(0, Math.min(pages - 1, Math.floor(+p) || 0)); onset(p); }
  prev.onclick = function () { set(page - 1); };
  next.onclick = function () { set(page + 1); };
  inp.onchange = function () { set(inp.value); };
  prev.disabled = page <= 0; next.disabled = page >= pages - 1;
  [prev, inp, next].forEach(function (x) { d.appendChild(x); });
  d.appendChild(document.createTextNode(' of ' + pages + ' '));
  return d;
}
/* "export SVG": the figure as a standalone SVG file (its own namespace
 * declaration, generic font families, a white background), made when clicked */
function svgText(svg) {
  var c = svg.cloneNode(true);
  c.setAttribute('xmlns', SVGNS);
  c.setAttribute('font-family', 'sans-serif');
  c.removeAttribute('class');
  var bg = document.createElementNS(SVGNS, 'rect');
  bg.setAttribute('width', '100%'); bg.setAttribute('height', '100%'); bg.setAttribute('fill', '#fff');
  c.insertBefore(bg, c.firstChild);
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(c) + '\n';
}
function exportLink(id, file, getSvg) {
  var a = el('a', { 'class': 'export', id: id, download: file, title: 'save this figure as a standalone SVG file' }, 'export SVG');
  a.onclick = function () {
    var svg = getSvg();
    if (!svg) return;
    a.setAttribute('href', 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(svgText(svg)));
  };
  return a;
}
function renderAttn() {
  var c = $('attnctl'); c.textContent = '';
  if (!attn.g) { $('heatmap').textContent = 'This trace has no *.' + N.attn_weights + ' tensors.'; return; }
  var layers = attnGroups[attn.g];
  var sg = el('select', { id: 'attn-group', 'aria-label': 'phase and round' });
  attnOrder.forEach(function (g) { var o = el('option', { value: g }, g); if (g === attn.g) o.selected = true; sg.appendChild(o); });
  sg.onchange = function () { attn.g = sg.value; if (attn.layer >= attnGroups[attn.g].length) attn.layer = 0; renderAttn(); };
  var sl = el('select', { id: 'attn-layer', 'aria-label': 'layer' });
  layers.forEach(function (n, l) { var o = el('option', { value: l }, 'layer ' + /\.layers\.(\d+)\./.exec(n)[1]); if (l === attn.layer) o.selected = true; sl.appendChild(o); });
  sl.onchange = function () { attn.layer = +sl.value; renderAttn(); };
  var t = T[layers[attn.layer]], Tq = t.s[1], S = t.s[2];
  /* the heads the page holds values of (all of them unless the page bound cut the tensor) */
  var Hn = Tq * S > 0 ? Math.min(t.s[0], Math.ceil(t.k / (Tq * S))) : 0;
  if (attn.head >= Hn) attn.head = 0;
  var sh;
  if (Hn <= 64) {
    sh = el('select', { id: 'attn-head', 'aria-label': 'head' });
    for (var h = 0; h < Hn; h++) { var o = el('option', { value: h }, 'head ' + h); if (h === attn.head) o.selected = true; sh.appendChild(o); }
    sh.onchange = function () { attn.head = +sh.value; renderAttn(); };
  } else sh = pager('attn-head', 'head', attn.head, Hn, function (p) { attn.head = p; renderAttn(); });
  [sg, sl, sh].forEach(function (x) { c.appendChild(x); });
  /* the window: WIN queries x WIN keys at a time */
  var qp = Math.ceil(Tq / WIN), kp = Math.ceil(S / WIN);
  attn.qp = Math.min(attn.qp || 0, Math.max(0, qp - 1)); attn.kp = Math.min(attn.kp || 0, Math.max(0, kp - 1));
  if (qp > 1) c.appendChild(pager('attn-qpage', 'queries ' + attn.qp * WIN + '..' + (Math.min(Tq, (attn.qp + 1) * WIN) - 1) + ', page', attn.qp, qp, function (p) { attn.qp = p; renderAttn(); }));
  if (kp > 1) c.appendChild(pager('attn-kpage', 'keys ' + attn.kp * WIN + '..' + (Math.min(S, (attn.kp + 1) * WIN) - 1) + ', page', attn.kp, kp, function (p) { attn.kp = p; renderAttn(); }));
  c.appendChild(tensorLink(t.n));
  c.appendChild(el('span', { 'class': 'note' }, ' ' + shapeStr(t) + ' = [H, queries, keys]' + (t.k < prod(t.s) ? '; this page holds heads 0..' + (Hn - 1) + ' (the first ' + t.k + ' of ' + prod(t.s) + ' values)' : '')));
  var hm = $('heatmap'); hm.textContent = '';
  if (Hn === 0) { hm.textContent = 'This page holds no values of ' + t.n + ' (see the page bounds below).'; $('heads').textContent = ''; return; }
  var q0 = attn.qp * WIN, k0 = attn.kp * WIN, nq = Math.min(Tq - q0, WIN), nk = Math.min(S - k0, WIN);
  var ax = attnAxes(attn.g, t, q0, k0);
  var cell = Math.max(14, Math.min(54, Math.floor(600 / Math.max(nk, nq))));
  var svg = heatmap(t, attn.head, cell, true, ax, q0, k0);
  svg.id = 'attn-svg';
  svg.setAttribute('data-tensor', t.n); svg.setAttribute('data-head', attn.head);
  hm.appendChild(svg);
  var ex = el('div');
  ex.appendChild(exportLink('export-attn', t.n + '.head' + attn.head + '.svg', function () { return $('attn-svg'); }));
  hm.appendChild(ex);
  var hs = $('heads'); hs.textContent = '';
  var shown = Math.min(Hn, 32);
  var small = Math.max(2, Math.min(10, Math.floor(520 / (shown * Math.max(nk, nq)))));
  for (var h2 = 0; h2 < shown; h2++) {
    var m = heatmap(t, h2, small, false, ax, q0, k0);
    m.appendChild(sv('title', null, 'head ' + h2));
    if (h2 === attn.head) m.setAttribute('class', 'sel');
    m.onclick = (function (h) { return function () { attn.head = h; renderAttn(); }; })(h2);
    hs.appendChild(m);
  }
  if (shown < Hn) hs.appendChild(el('span', { 'class': 'note' }, ' (the first ' + shown + ' of ' + Hn + ' heads; pick any with the head control)'));
  var note = ax.kind === 'draft' ? 'Rows: the block\'s queries (anchor and masks). Columns: every key: cached context of earlier rounds, this round\'s injected context rows (target hidden states through fc + hidden_norm), then the block itself. No causal mask: each block row sees the whole block.'
    : ax.kind === 'verify' || ax.kind === 'prefill' ? 'Target causal attention: rows are the new tokens, columns the cache after appending them; a query never sees a later position.'
    : 'Rows: queries; columns: keys.';
  $('attnnote').textContent = note + ' Hover a cell for its exact value.';
}

/* ---- the tensor browser ---- */
var tsel = null, tslice = 0, trow = 0, tcol = 0;
function renderList() {
  var f = $('tfilter').value.trim().toLowerCase(), d = $('tlist'); d.textContent = '';
  var last = null, selItem = null;
  D.tensors.forEach(function (t) {
    if (f && t.n.toLowerCase().indexOf(f) < 0) return;
    var grp = t.ph + (t.r ? ' ' + t.r : '');
    if (grp !== last) { d.appendChild(el('div', { 'class': 'g' }, grp)); last = grp; }
    var i = el('div', { 'class': 'i' + (t.n === tsel ? ' sel' : ''), title: shapeStr(t) }, t.n);
    i.onclick = function () { showTensor(t.n); };
    d.appendChild(i);
    if (t.n === tsel) selItem = i;
  });
  /* keep the selected name in view inside the list (the page itself does not scroll) */
  if (selItem && (selItem.offsetTop < d.scrollTop || selItem.offsetTop > d.scrollTop + d.clientHeight - 20))
    d.scrollTop = Math.max(0, selItem.offsetTop - d.clientHeight / 3);
}
function diverge(x, m) {
  if (!isFinite(x) || m === 0) return '#fff';
  var v = Math.max(-1, Math.min(1, x / m)), a = Math.round(255 - 150 * Math.abs(v));
  return v >= 0 ? 'rgb(255,' + a + ',' + a + ')' : 'rgb(' + a + ',' + a + ',255)';
}
function showTensor(name) {
  if (tsel !== name) { tslice = 0; trow = 0; tcol = 0; }
  tsel = name;
  renderList();
  var t = T[name], d = $('tdetail'); d.textContent = '';
  if (!t) { d.textContent = 'No tensor ' + name + ' in this trace.'; return; }
  d.appendChild(el('h3', { id: 'tname' }, t.n));
  var tb = el('table', { 'class': 'kv' });
  function row(k, v) { var tr = el('tr'); tr.appendChild(el('th', null, k)); var td = el('td'); if (typeof v === 'string') td.textContent = v; else td.appendChild(v); tr.appendChild(td); tb.appendChild(tr); }
  row('shape', shapeStr(t) + ' (' + prod(t.s) + ' values)');
  row('dtype', t.dt);
  row('phase / round', t.ph + ' / ' + t.r);
  row('meaning (trace)', t.m || '\u2014');
  var g = gloss(t.n);
  row('glossary', g ? g[1] + ' (' + g[0] + ')' : '\u2014');
  var v = vals(t), n = prod(t.s);
  var kept = t.k < n ? 'over the ' + t.k + ' values on this page, the first of ' + n : 'over all ' + n + ' values';
  if (t.st) row('statistics', 'min ' + (t.st[0] === null ? '-' : exact(t, t.st[0])) + ', max ' + (t.st[1] === null ? '-' : exact(t, t.st[1])) + ', mean ' + (t.st[2] === null ? '-' : t.st[2].toPrecision(6)) + ', std ' + (t.st[3] === null ? '-' : t.st[3].toPrecision(6)) + (t.st[4] ? ', ' + t.st[4] + ' not finite' : '') + ' (' + kept + ')');
  else if (v.length) { var mn = v[0], mx = v[0]; v.forEach(function (x) { if (x < mn) mn = x; if (x > mx) mx = x; }); row('values', 'min ' + mn + ', max ' + mx + ' (' + kept + ')'); }
  if (t.k < n) {
    var rowlen = t.s.length ? n / t.s[0] : n;
    row('on this page', 'the first ' + t.k + ' of ' + n + ' values in C order' + (t.k % rowlen === 0 ? ' (the first ' + (t.k / rowlen) + ' of ' + t.s[0] + ' rows)' : '') + '; left out by the page bound (' + boundsStr() + '); the .npy file has every value');
  }
  if (t.v && V && /(ids|sampled)$/.test(t.n)) row('as words', toks(v));
  d.appendChild(tb);
  /* a 2-D view of the last two axes, RW rows x CW columns at a time; the
   * leading axes pick a slice (for [H, T, d] tensors: the head). Only the
   * values on this page are reachable, every one of them. */
  var s = t.s.length ? t.s : [1];
  var cols = s[s.length - 1], rows = s.length >= 2 ? s[s.length - 2] : 1, per = rows * cols;
  var slices = per > 0 ? Math.max(1, Math.ceil(t.k / per)) : 1;
  tslice = Math.min(tslice, slices - 1);
  var base = tslice * per;
  var rowsHere = cols > 0 ? Math.min(rows, Math.ceil(Math.max(0, t.k - base) / cols)) : 0;
  var RW = 64, CW = 64;
  var rpages = Math.max(1, Math.ceil(rowsHere / RW)), cpages = Math.max(1, Math.ceil(Math.min(cols, Math.max(0, t.k - base)) / CW));
  trow = Math.min(trow, rpages - 1); tcol = Math.min(tcol, cpages - 1);
  var ctl = el('div', { style: 'margin: 6px 0', id: 'tpagers' });
  if (s.length >= 3) {
    var lead = s.slice(0, s.length - 2), idx = [], r = tslice;
    for (var a = lead.length - 1; a >= 0; a--) { idx.unshift(r % lead[a]); r = Math.floor(r / lead[a]); }
    ctl.appendChild(pager('tslice', 'slice [' + idx.join(', ') + ', :, :]' + (lead.length === 1 && HEADS_RE.test(t.n) ? ' (head ' + tslice + ')' : '') + ':', tslice, slices, function (p) { tslice = p; trow = 0; showTensor(name); }));
  }
  if (rpages > 1) ctl.appendChild(pager('trows', 'rows ' + trow * RW + '..' + (Math.min(rowsHere, (trow + 1) * RW) - 1) + ':', trow, rpages, function (p) { trow = p; showTensor(name); }));
  if (cpages > 1) ctl.appendChild(pager('tcols', 'columns ' + tcol * CW + '..' + (Math.min(cols, (tcol + 1) * CW) - 1) + ':', tcol, cpages, function (p) { tcol = p; showTensor(name); }));
  d.appendChild(ctl);
  d.appendChild(el('div', { id: 'valreadout' }, 'hover a cell for its exact value'));
  var grid = el('div', { id: 'grid' }), table = el('table', { id: 'tgrid', 'data-tensor': t.n, 'data-slice': tslice });
  var m = 0;
  if (t.st) m = Math.max(Math.abs(t.st[0] || 0), Math.abs(t.st[1] || 0));
  var hr = el('tr'); hr.appendChild(el('th'));
  var j0 = tcol * CW, c1 = Math.min(cols, j0 + CW);
  for (var j = j0; j < c1; j++) hr.appendChild(el('th', null, j));
  table.appendChild(hr);
  var i0 = trow * RW, i1 = Math.min(rowsHere, i0 + RW);
  for (var i = i0; i < i1; i++) {
    var tr = el('tr'); tr.appendChild(el('td', { 'class': 'rh' }, i));
    for (var j2 = j0; j2 < c1; j2++) {
      var flat = base + i * cols + j2;
      if (flat >= t.k) break;
      var x = v[flat], idx2 = [];
      var rr = flat;
      for (var a2 = s.length - 1; a2 >= 0; a2--) { idx2.unshift(rr % s[a2]); rr = Math.floor(rr / s[a2]); }
      var tip = t.n + '[' + (t.s.length ? idx2.join(', ') : '') + '] = ' + exact(t, x) + (t.v && V && /(ids|sampled)$/.test(t.n) ? ' (' + word(x) + ')' : '');
      var td = el('td', { title: tip, style: 'background:' + (t.v ? '#fff' : diverge(x, m)) }, t.v ? String(x) : sig4(x));
      td.onmouseenter = (function (tip) { return function () { $('valreadout').textContent = tip; }; })(tip);
      tr.appendChild(td);
    }
    table.appendChild(tr);
  }
  grid.appendChild(table);
  d.appendChild(grid);
}

/* ---- keyboard, buttons, start ---- */
$('prev').onclick = function () { go(cur - 1); };
$('next').onclick = function () { go(cur + 1); };
$('tfilter').oninput = renderList;
document.addEventListener('keydown', function (e) {
  var tag = (e.target && e.target.tagName) || '';
  if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA') return;
  if (e.key === 'ArrowRight') { go(cur + 1); e.preventDefault(); }
  else if (e.key === 'ArrowLeft') { go(cur - 1); e.preventDefault(); }
  else if (attn.g && (e.key === 'ArrowDown' || e.key === 'ArrowUp')) {
    var t = T[attnGroups[attn.g][attn.layer]], TS = t.s[1] * t.s[2];
    var Hn = TS > 0 ? Math.min(t.s[0], Math.ceil(t.k / TS)) : 0;
    if (Hn) { attn.head = (attn.head + (e.key === 'ArrowDown' ? 1 : Hn - 1)) % Hn; renderAttn(); }
    e.preventDefault();
  } else if (attn.g && (e.key === ']' || e.key === '[')) {
    var Ln = attnGroups[attn.g].length;
    attn.layer = (attn.layer + (e.key === ']' ? 1 : Ln - 1)) % Ln; renderAttn();
  }
});
/* The URL fragment picks the first view (docs/explorer.md):
 *   #view=K (or #step=K)  the K-th view (1..) of the navigation
 *   #keys=N               then press the right arrow N times (-N: the left one)
 *   #attn=GROUP&layer=L&head=H   the heatmap: GROUP prefill, draftR or verifyR,
 *                         L the layer id, H the head; #qpage= #kpage= its window
 *   #tensor=NAME          the tensor browser on NAME; #head=H (or #slice=S)
 *                         its slice of the leading axes, #row= #col= its page
 *   #export=attn|timeline the figure's standalone SVG text, shown in the page
 */
var hash = {};
location.hash.replace(/^#/, '').split('&').forEach(function (kv) { var i = kv.indexOf('='); if (i > 0) hash[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1)); });
function num(x) { var v = Math.floor(+x); return isFinite(v) && v > 0 ? v : 0; }
renderSummary();
var view = hash.view || hash.step;
cur = view ? Math.max(0, Math.min(STEPS.length - 1, num(view) - 1)) : 0;
renderStep();
if (hash.attn && attnGroups[hash.attn]) attn.g = hash.attn;
if (attn.g && hash.layer) attnGroups[attn.g].forEach(function (n, i) { if (/\.layers\.(\d+)\./.exec(n)[1] === hash.layer) attn.layer = i; });
if (hash.head && !hash.tensor) attn.head = num(hash.head);
attn.qp = num(hash.qpage); attn.kp = num(hash.kpage);
renderAttn();
if (hash.tensor && T[hash.tensor]) {
  tsel = hash.tensor;
  tslice = num(hash.slice || hash.head); trow = num(hash.row); tcol = num(hash.col);
}
showTensor(hash.tensor && T[hash.tensor] ? hash.tensor : (T['draft1.block_output_ids'] ? 'draft1.block_output_ids' : D.tensors[0].n));
/* #keys=N presses the right arrow N times (#keys=-N the left one): how explorer-check tests the keyboard */
if (hash.keys) for (var kk = 0; kk < Math.min(1000, Math.abs(+hash.keys) || 0); kk++)
  document.dispatchEvent(new KeyboardEvent('keydown', { key: +hash.keys > 0 ? 'ArrowRight' : 'ArrowLeft', bubbles: true }));
if (hash.export) {
  var fig = hash.export === 'timeline' ? $('timeline-svg') : $('attn-svg');
  document.body.appendChild(el('pre', { id: 'export-out', style: 'display: none' }, fig ? svgText(fig) : ''));
}
document.body.setAttribute('data-ready', '1');
})();
