#!/bin/sh
# explorer-check.sh - open the trace explorer in a real browser (headless
# Chromium, JavaScript running) and check what it shows against the trace.
#
#   sh explorer/explorer-check.sh        (from the repository root, after
#                                             `make dflash weights`; `make explorer-check`)
#
# Two pages: walkthrough/explorer.html (the default run, written by `make`) and a
# fresh explorer of a random-set run with block size 6. For each page:
#   - the page finished rendering (body data-ready="1") and its error box,
#     which window.onerror fills, is empty; Chromium's console log
#     (--enable-logging=stderr) holds no console message from the page;
#   - the round table shows every round's acceptance length and the output
#     line shows every output id (and word), as read from the trace's .npy
#     files by the small od(1) reader below, not by the explorer's code;
#   - attention values: three heatmap cells picked at random (phase, round,
#     layer, head, query, key; the pick is printed) show exactly the trace's
#     float32 value (od prints the shortest decimal that reads back to the
#     same float32, as the page does; awk compares the two numbers);
#   - the arrow keys step through the run (the page's #keys=N presses them);
#   - every value is reachable: a random cell of head 7 of
#     draft1.layers.0.self_attn.k in the tensor browser (#tensor=...&head=7)
#     and of a random head of a round-2 target attention (#attn=verify2...)
#     show the trace's value; the page says what its bound left out;
#   - "export SVG": the heatmap's standalone SVG (#export=attn puts its text
#     in the page) has the SVG namespace, a generic font family, nothing to
#     load, and renders on its own (a screenshot of it);
#   - offline: the HTML has no src=, href=, url(, @import, fetch(,
#     XMLHttpRequest, WebSocket or http(s):// other than the SVG namespace
#     name; Chromium runs with a dead proxy (127.0.0.1:9) and still renders
#     the whole page; and its network log holds no URL that Chromium does
#     not also request when it opens an empty page (its own background
#     services).
# Screenshots of both pages go to build/explorer-check/ for a human to look at.
set -eu
export LC_ALL=C
CHROMIUM=${CHROMIUM:-chromium}
out=build/explorer-check
rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "explorer-check: FAIL: $*"; fail=1; }

command -v "$CHROMIUM" > /dev/null || { echo "explorer-check: $CHROMIUM not found (apt-get install chromium)"; exit 1; }
[ -x ./dflash ] || { echo "explorer-check: ./dflash not built (make dflash weights)"; exit 1; }

# ---- a tiny .npy reader (format 1.0, little-endian, as trace.c writes) -----
npy_check() {  # FILE DESCR: the magic, version 1.0 and the dtype
    [ "$(od -A n -t x1 -N 8 "$1" | tr -d ' \n')" = "934e554d50590100" ] || { bad "$1: not a version 1.0 .npy"; return 1; }
    head -c 128 "$1" | grep -q "'descr': '$2'" || { bad "$1: dtype is not $2"; return 1; }
}
npy_data() {  # FILE TYPE: every value, one per line (TYPE: d8 for <i8, f4 for <f4)
    hl=$(od -A n -t u2 -j 8 -N 2 "$1" | tr -d ' ')
    od -A n -v -t "$2" -j $((10 + hl)) "$1" | tr -s ' ' '\n' | sed '/^$/d'
}
npy_shape() {  # FILE: the shape's numbers, space separated
    head -c 128 "$1" | sed -n "s/.*'shape': (\([0-9, ]*\)).*/\1/p" | tr ',' ' '
}
rnd() {  # N: a random number in 0..N-1
    echo $(( $(od -A n -t u4 -N 4 /dev/urandom | tr -d ' ') % $1 ))
}

FLAGS="--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --disable-sync --disable-default-apps
       --disable-background-networking --disable-component-update --proxy-server=127.0.0.1:9
       --disable-features=OptimizationGuideModelDownloading,OptimizationHintsFetching,OptimizationTargetPrediction,OptimizationHints
       --enable-logging=stderr --v=0 --virtual-time-budget=10000"

# the URLs (without query) Chromium requests on its own, from an empty page
printf '<!DOCTYPE html><title>empty</title>\n' > "$tmp/empty.html"
# shellcheck disable=SC2086
timeout 120 "$CHROMIUM" $FLAGS --log-net-log="$tmp/empty.net.json" --dump-dom "file://$tmp/empty.html" \
    > /dev/null 2>&1 || true
urls() { grep -o '"url":"[^"]*"' "$1" 2> /dev/null | sed 's/^"url":"//; s/[?#].*//; s/"$//' | sort -u; }
urls "$tmp/empty.net.json" > "$tmp/background.urls"

# render PAGE (an .html file) with HASH; the DOM goes to $tmp/dom.html
render() {
    rm -f "$tmp/dom.html" "$tmp/net.json"
    # shellcheck disable=SC2086
    timeout 120 "$CHROMIUM" $FLAGS --log-net-log="$tmp/net.json" --dump-dom "file://$(pwd)/$1$2" \
        > "$tmp/dom.html" 2> "$tmp/chromium.log" || { bad "$1: chromium failed"; cat "$tmp/chromium.log"; return 1; }
    grep -q 'data-ready="1"' "$tmp/dom.html" || bad "$1$2: the page did not finish rendering"
    grep -q '<div id="errors"></div>' "$tmp/dom.html" || {
        bad "$1$2: the page reported errors:"; sed -n 's/.*<div id="errors">\([^<]*\)<.*/\1/p' "$tmp/dom.html"; }
    if grep -q 'CONSOLE' "$tmp/chromium.log"; then bad "$1$2: console messages:"; grep CONSOLE "$tmp/chromium.log"; fi
    urls "$tmp/net.json" | grep -v '^file://' | comm -23 - "$tmp/background.urls" > "$tmp/page.urls" || true
    if [ -s "$tmp/page.urls" ]; then bad "$1$2: requests left the page:"; cat "$tmp/page.urls"; fi
}

page_name() {  # PAGE KEY: the name the page's data gives KEY ("names":{"KEY":"...",...}: the name table's)
    grep -o '"names":{[^}]*}' "$1" | grep -o "\"$2\":\"[^\"]*\"" | head -n 1 | sed 's/^"[^"]*":"//; s/"$//'
}
html_escape() { sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g'; }

check_page() {  # PAGE TRACE_DIR VOCAB LABEL
    page=$1 dir=$2 vocab=$3 label=$4
    echo "== $label: $page"
    # offline by construction: nothing in the file can name a resource
    if grep -n -o -i -E '(src|href)[[:space:]]*=|url\(|@import|fetch\(|XMLHttpRequest|WebSocket|EventSource|sendBeacon' "$page" | head -5 | grep .; then
        bad "$page names an external resource (above)"
    fi
    if sed 's#http://www\.w3\.org/2000/svg##g' "$page" | grep -n -o -E 'https?://[^ "]*' | head -5 | grep .; then
        bad "$page holds a URL (above)"
    fi
    render "$page" "" || return 0
    # the names tensors are found by: the name table's, as dflash explore wrote them into the page
    acc_name=$(page_name "$page" acceptance_length) out_name=$(page_name "$page" output_ids)
    attn_name=$(page_name "$page" attn_weights)
    [ -n "$acc_name" ] && [ -n "$out_name" ] && [ -n "$attn_name" ] || { bad "$label: the page's data has no names"; return 0; }
    attn_re=$(printf '%s' "$attn_name" | sed 's/\./\\./g')
    # acceptance lengths, round by round
    r=1
    while [ -f "$dir/verify$r.$acc_name.npy" ]; do
        f="$dir/verify$r.$acc_name.npy"
        npy_check "$f" '<i8' || return 0
        want=$(npy_data "$f" d8)
        got=$(sed -n "s/.*<td id=\"acc-$r\">\([^<]*\)<.*/\1/p" "$tmp/dom.html")
        [ "$got" = "$want" ] || bad "$label round $r: acceptance length shown \"$got\", trace $want"
        r=$((r + 1))
    done
    rounds=$((r - 1))
    [ "$rounds" -ge 1 ] || bad "$label: the trace has no rounds"
    shown=$(grep -o '<td id="acc-[0-9]*">' "$tmp/dom.html" | wc -l)
    [ "$shown" -eq "$rounds" ] || bad "$label: the page shows $shown rounds, the trace has $rounds"
    # output ids and words
    npy_check "$dir/$out_name.npy" '<i8' || return 0
    want=$(npy_data "$dir/$out_name.npy" d8 | tr '\n' ' ' | sed 's/ $//')
    got=$(sed -n 's/.*<span id="output-ids" class="mono">\([^<]*\)<.*/\1/p' "$tmp/dom.html")
    [ "$got" = "$want" ] || bad "$label: output ids shown \"$got\", trace \"$want\""
    words=$(for id in $want; do sed -n "$((id + 1))p" "$vocab"; done | tr '\n' ' ' | sed 's/ $//' | html_escape)
    grep -q "<code id=\"output-text\">$words</code>" "$tmp/dom.html" || bad "$label: output words \"$words\" not shown"
    echo "$label: $rounds rounds, acceptance lengths $(sed -n 's/.*<span id="acceptance-lengths" class="mono">\([^<]*\)<.*/\1/p' "$tmp/dom.html"), output ids $got"
    # the keyboard: two presses of the right arrow from the overview reach round 1's draft step
    render "$page" "#keys=2" || return 0
    got=$(sed -n 's/.*<span id="steptitle">\([^<]*\)<.*/\1/p' "$tmp/dom.html")
    [ "$got" = "Round 1: the draft proposes" ] || bad "$label: after two right-arrow presses the step is \"$got\""
    render "$page" "#step=4&keys=-3" || return 0
    got=$(sed -n 's/.*<span id="steptitle">\([^<]*\)<.*/\1/p' "$tmp/dom.html")
    [ "$got" = "Overview of the run" ] || bad "$label: three left-arrow presses from step 4 land on \"$got\""
    # three attention cells picked at random
    grep -o '"name":"[^"]*\.layers\.[0-9]*\.'"$attn_re"'"' "$dir/trace.jsonl" | sed 's/"name":"//; s/"$//' > "$tmp/attn.names"
    n=$(wc -l < "$tmp/attn.names")
    [ "$n" -gt 0 ] || { bad "$label: no attention tensors in the trace"; return 0; }
    grep '^draft' "$tmp/attn.names" > "$tmp/attn.draft" || true
    for pick in 1 2 3; do
        # the first pick is a draft attention (KV injection); a cell the mask made 0 is picked again
        list="$tmp/attn.names"
        [ "$pick" = 1 ] && [ -s "$tmp/attn.draft" ] && list="$tmp/attn.draft"
        tries=0 want=0
        while [ "$tries" -lt 20 ] && awk -v w="$want" 'BEGIN { exit !(w + 0 == 0) }'; do
            name=$(sed -n "$(( $(rnd "$(wc -l < "$list")") + 1 ))p" "$list")
            f="$dir/$name.npy"
            npy_check "$f" '<f4' || return 0
            set -- $(npy_shape "$f")
            H=$1 Tq=$2 S=$3
            h=$(rnd "$H") q=$(rnd "$Tq") k=$(rnd "$S")
            want=$(npy_data "$f" f4 | sed -n "$((h * Tq * S + q * S + k + 1))p")
            tries=$((tries + 1))
        done
        group=${name%%.layers.*}
        layer=${name#*.layers.}
        layer=${layer%%.*}
        render "$page" "#attn=$group&layer=$layer&head=$h" || return 0
        got=$(grep -o "<title>$name\[$h, $q, $k\] = [^<]*</title>" "$tmp/dom.html" | sed 's/.* = //; s/<.*//')
        if [ -z "$got" ]; then
            bad "$label: no heatmap cell $name[$h, $q, $k] in the page"
        elif awk -v a="$got" -v b="$want" 'BEGIN { exit !(a + 0 == b + 0) }'; then
            echo "$label: $name[$h, $q, $k] = $got (trace: $want)"
        else
            bad "$label: $name[$h, $q, $k] shown as $got, the trace has $want"
        fi
    done
    # any value of any tensor: head 7 (or the last head) of a draft k tensor in the tensor browser
    f="$dir/draft1.layers.0.self_attn.k.npy"
    if [ -f "$f" ]; then
        npy_check "$f" '<f4' || return 0
        set -- $(npy_shape "$f")
        H=$1 Tk=$2 d=$3
        h=7; [ "$h" -lt "$H" ] || h=$((H - 1))
        i=$(rnd "$Tk") j=$(rnd "$d")
        want=$(npy_data "$f" f4 | sed -n "$((h * Tk * d + i * d + j + 1))p")
        render "$page" "#tensor=draft1.layers.0.self_attn.k&head=$h&col=$((j / 64))" || return 0
        got=$(grep -o "title=\"draft1.layers.0.self_attn.k\[$h, $i, $j\] = [^\"]*\"" "$tmp/dom.html" | sed 's/.* = //; s/"$//')
        # the values the page holds ("k"): the page bound may leave the rest out, and must say so
        held=$(grep -o '{"n":"draft1.layers.0.self_attn.k",[^}]*"k":[0-9]*' "$page" | sed 's/.*"k"://')
        if [ "$((h * Tk * d + i * d + j))" -ge "${held:-0}" ]; then
            grep -q 'values in C order.*left out by the page bound' "$tmp/dom.html" ||
                bad "$label: draft1.layers.0.self_attn.k[$h, $i, $j] is beyond the $held values held, and the page does not say so"
            echo "$label: draft1.layers.0.self_attn.k[$h, $i, $j] is beyond the page bound ($held values held; the page says so)"
        elif [ -z "$got" ]; then bad "$label: draft1.layers.0.self_attn.k[$h, $i, $j] is not reachable in the tensor browser"
        elif awk -v a="$got" -v b="$want" 'BEGIN { exit !(a + 0 == b + 0) }'; then
            echo "$label: draft1.layers.0.self_attn.k[$h, $i, $j] = $got (trace: $want)"
        else bad "$label: draft1.layers.0.self_attn.k[$h, $i, $j] shown as $got, the trace has $want"; fi
        grep -q '<div id="bounds" class="sum">' "$tmp/dom.html" || bad "$label: no line saying what the page bound left out"
    fi
    # a target attention head of round 2: a random layer, head and cell of verify2
    grep '^verify2\.' "$tmp/attn.names" > "$tmp/attn.v2" || true
    if [ -s "$tmp/attn.v2" ]; then
        name=$(sed -n "$(( $(rnd "$(wc -l < "$tmp/attn.v2")") + 1 ))p" "$tmp/attn.v2")
        f="$dir/$name.npy"
        set -- $(npy_shape "$f")
        H=$1 Tq=$2 S=$3
        h=$(rnd "$H") q=$(rnd "$Tq") k=$(rnd "$S")
        want=$(npy_data "$f" f4 | sed -n "$((h * Tq * S + q * S + k + 1))p")
        layer=${name#*.layers.}
        layer=${layer%%.*}
        render "$page" "#attn=verify2&layer=$layer&head=$h" || return 0
        got=$(grep -o "<title>$name\[$h, $q, $k\] = [^<]*</title>" "$tmp/dom.html" | sed 's/.* = //; s/<.*//')
        if [ -z "$got" ]; then bad "$label: no heatmap cell $name[$h, $q, $k] in the page"
        elif awk -v a="$got" -v b="$want" 'BEGIN { exit !(a + 0 == b + 0) }'; then
            echo "$label: $name[$h, $q, $k] = $got (trace: $want)"
        else bad "$label: $name[$h, $q, $k] shown as $got, the trace has $want"; fi
    else
        bad "$label: the trace has no round-2 target attention"
    fi
    # "export SVG": the heatmap's standalone SVG (its own namespace, generic fonts, nothing to load)
    render "$page" "#attn=draft1&layer=0&head=1&export=attn" || return 0
    sed -n '/<pre id="export-out"/,/<\/pre>/p' "$tmp/dom.html" | sed 's/^.*<pre id="export-out"[^>]*>//; s/<\/pre>.*//' |
        sed 's/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g; s/&amp;/\&/g' > "$out/$label-attn.svg"
    head -n 1 "$out/$label-attn.svg" | grep -q '^<?xml version="1.0"' || bad "$label: the exported SVG does not start with an XML declaration"
    head -c 300 "$out/$label-attn.svg" | grep -q '<svg[^>]*xmlns="http://www.w3.org/2000/svg"' || bad "$label: the exported SVG has no SVG namespace"
    grep -q 'font-family="sans-serif"' "$out/$label-attn.svg" || bad "$label: the exported SVG names no generic font family"
    if grep -n -o -i -E '(src|href)[[:space:]]*=|url\(|@import' "$out/$label-attn.svg" | head -3 | grep .; then bad "$label: the exported SVG loads something"; fi
    grep -q "<title>draft1.layers.0.$attn_re\\[1, " "$out/$label-attn.svg" || bad "$label: the exported SVG is not head 1's heatmap"
    # shellcheck disable=SC2086
    timeout 120 "$CHROMIUM" $FLAGS --hide-scrollbars --window-size=700,500 \
        --screenshot="$out/$label-attn-svg.png" "file://$(pwd)/$out/$label-attn.svg" > /dev/null 2>&1 || bad "$label: the exported SVG does not render"
    # screenshots for a human (not compared)
    # shellcheck disable=SC2086
    timeout 120 "$CHROMIUM" $FLAGS --hide-scrollbars --window-size=1400,1000 \
        --screenshot="$out/$label.png" "file://$(pwd)/$page#step=3" > /dev/null 2>&1 || bad "$label: no screenshot"
}

[ -f walkthrough/explorer.html ] || { echo "explorer-check: walkthrough/explorer.html missing (make explorer)"; exit 1; }
./dflash --weights toy_weights/walkthrough --trace "$tmp/walk" > /dev/null
check_page walkthrough/explorer.html "$tmp/walk" toy_weights/walkthrough/vocab.txt walkthrough

./dflash --weights toy_weights/random --prompt "A dog saw" --block-size 6 --max-new-tokens 12 --ignore-eos \
    --trace "$tmp/rand" > /dev/null
./dflash explore "$tmp/rand" "$out/random-b6.html" --vocab toy_weights/random/vocab.txt
check_page "$out/random-b6.html" "$tmp/rand" toy_weights/random/vocab.txt random-b6

if [ "$fail" -ne 0 ]; then echo "explorer-check: FAILED"; exit 1; fi
echo "explorer-check: both pages render offline, without errors, and show the trace's values (screenshots in $out/)"
