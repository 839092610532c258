# tools/doccheck.awk - the prose checks of make docs-check (tools/doccheck.sh
# runs it): every relative link of every page resolves, and so does its
# #anchor. Run as
#   awk -f tools/doccheck.awk pass=1 PAGE... pass=2 PAGE...
# Pass 1 reads each page's headings (outside fenced code) and makes their
# anchors the way GitHub does: the heading's text without its markup,
# lower-cased, punctuation dropped, spaces turned into '-', a repeated
# anchor given -1, -2, ...; an explicit <a id="..."> or <a name="..."> counts
# too; it also counts each page's lines, for #L12 and #L12-L20 anchors on
# source files. Pass 2 reads each link [text](target) outside code: a target
# with a scheme (https:, mailto:) is not checked; a path is taken from the
# page's folder and must exist; an anchor must be one of the target page's.
# Prints one line per broken link, "PAGE:LINE: ...", and exits 1 if any.
# Byte-wise (LC_ALL=C): non-ASCII letters are kept as they are, as GitHub
# keeps them; the CJK and general punctuation marks are dropped, as it does.

function dirof(p) { return (p ~ /\//) ? substr(p, 1, match(p, /\/[^\/]*$/) - 1) : "." }
function normpath(p,    n, i, parts, out, k, o) {
    n = split(p, parts, "/"); k = 0
    for (i = 1; i <= n; i++) {
        if (parts[i] == "" || parts[i] == ".") continue
        if (parts[i] == ".." && k > 0 && o[k] != "..") { k--; continue }
        o[++k] = parts[i]
    }
    out = ""
    for (i = 1; i <= k; i++) out = out (i > 1 ? "/" : "") o[i]
    return out == "" ? "." : out
}
function exists(p,    r) {
    if (p in seen_path) return seen_path[p]
    r = (system("test -e '" p "'") == 0)
    seen_path[p] = r
    return r
}
# the rendered text of a heading: links keep their text, markup goes
function heading_text(s) {
    while (match(s, /!?\[[^]]*\]\([^)]*\)/)) {
        t = substr(s, RSTART, RLENGTH); sub(/^!?\[/, "", t); sub(/\]\([^)]*\)$/, "", t)
        s = substr(s, 1, RSTART - 1) t substr(s, RSTART + RLENGTH)
    }
    gsub(/<[^>]*>/, "", s)
    return s
}
function slug(s) {
    s = tolower(heading_text(s))
    # ASCII punctuation but '-' and '_'
    gsub(/[!-,.\/:-@[-^`{-~]/, "", s)
    gsub(/\\/, "", s)
    # general punctuation (U+2010-U+203F: dashes, quotes, ellipsis), CJK
    # punctuation (U+3000-U+303F) and the fullwidth marks (U+FF01-U+FF0F,
    # U+FF1A-U+FF20, U+FF3B-U+FF40, U+FF5B-U+FF65)
    gsub(/\342\200[\220-\277]/, "", s)
    gsub(/\343\200[\200-\277]/, "", s)
    gsub(/\357\274[\201-\217\232-\240\273-\277]/, "", s)
    gsub(/\357\275[\200\233-\245]/, "", s)
    gsub(/ /, "-", s)
    return s
}
function code_free(s) {   # the line without its inline code spans
    gsub(/``[^`]*``/, "", s)
    gsub(/`[^`]*`/, "", s)
    return s
}
FNR == 1 { fence = ""; if (pass == 1) delete count_of }
{
    line = $0
    if (match(line, /^ ? ? ?(```|~~~)/)) {
        mark = substr(line, RSTART + RLENGTH - 3, 3)
        if (fence == "") { fence = mark; next }
        if (mark == fence) { fence = ""; next }
    }
    if (fence != "") { if (pass == 1) lines[FILENAME] = FNR; next }
}
pass == 1 {
    lines[FILENAME] = FNR
    if (match(line, /^ ? ? ?#+[ \t]/)) {
        h = line; sub(/^ *#+[ \t]+/, "", h); sub(/[ \t]+#+[ \t]*$/, "", h); sub(/[ \t]+$/, "", h)
        a = slug(h)
        if (a in count_of) { n = ++count_of[a]; a = a "-" n } else count_of[a] = 0
        anchor[FILENAME, a] = 1
    }
    s = line
    while (match(s, /<a (id|name)="[^"]*"/)) {
        t = substr(s, RSTART, RLENGTH); sub(/^<a (id|name)="/, "", t); sub(/"$/, "", t)
        anchor[FILENAME, t] = 1
        s = substr(s, RSTART + RLENGTH)
    }
    next
}
pass == 2 {
    s = code_free(line)
    while (match(s, /\]\([^)]*\)/)) {
        target = substr(s, RSTART + 2, RLENGTH - 3)
        s = substr(s, RSTART + RLENGTH)
        sub(/[ \t]+"[^"]*"$/, "", target)
        if (target ~ /^[a-zA-Z][a-zA-Z0-9+.-]*:/ || target ~ /^</ || target == "") continue
        path = target; frag = ""
        if (index(target, "#")) { path = substr(target, 1, index(target, "#") - 1); frag = substr(target, index(target, "#") + 1) }
        file = (path == "") ? FILENAME : normpath(dirof(FILENAME) "/" path)
        if (path != "" && !exists(file)) { print FILENAME ":" FNR ": " target ": no file " file; bad++; continue }
        if (frag == "") continue
        if (frag ~ /^L[0-9]+(-L[0-9]+)?$/) {
            split(frag, r, "-"); last = substr(r[length(r) > 1 ? 2 : 1], 2) + 0
            if (!(file in nlines)) { nlines[file] = 0; while ((getline tmp < file) > 0) nlines[file]++; close(file) }
            if (last > nlines[file]) { print FILENAME ":" FNR ": " target ": " file " has " nlines[file] " lines"; bad++ }
            continue
        }
        if (file !~ /\.md$/) { print FILENAME ":" FNR ": " target ": an anchor into a page that is not Markdown"; bad++; continue }
        if (!((file, frag) in anchor)) { print FILENAME ":" FNR ": " target ": " file " has no heading or anchor '" frag "'"; bad++ }
    }
}
END { exit bad > 0 }
