#!/bin/sh
# tools/pitfall.sh - build one porting pitfall's program from its patch.
#
#   sh tools/pitfall.sh build PATCH PROGRAM "CC FLAGS" "LDLIBS" OBJECT...
#   sh tools/pitfall.sh check-series DIR
#   sh tools/pitfall.sh refresh PATCH
#
# A pitfall is a unified diff of ONE source file of the program (dflash.c
# for the inference pitfalls; any other .c of $(SRC) works the same way),
# written as the mistake a port makes: walkthrough/pitfalls/NAME.diff. Its
# text before the "--- a/FILE" line is its description (first line: the
# mistake in one sentence; then how ports get it wrong).
#
# build: copies FILE (named by the patch's "+++ b/FILE") to NAME/FILE in
# PROGRAM's directory (build/pitfalls/NAME/FILE for PROGRAM dflash-NAME;
# train-NAME/ for dflash-train-NAME, the training pitfalls of
# walkthrough/train-pitfalls/, patches of train/train.c), applies PATCH to the copy with `patch` (GNU
# patch, Debian package patch, part of build-essential's dependencies) with
# no fuzz, compiles it and links it with the OBJECTs of the program (one
# X.o per source X.c), all but FILE's own: PROGRAM is the program with
# that one mistake. A patch that no longer applies exactly (the lines it
# changes or their context were edited) fails here, naming the patch; make
# it again from the new source (apply it by hand, fix, `diff -u`).
# check-series: DIR/series lists every DIR/*.diff once and nothing else.
# refresh: after an edit of FILE near a patch's lines, applies PATCH with
# patch's default fuzz and, when that works, rewrites PATCH against the
# current FILE (its description kept). Read the new diff: the mistake must
# still be the one the description says.
set -eu
abspath() { case $1 in /*) echo "$1";; *) echo "$(pwd)/$1";; esac; }

case ${1:-} in
build)
    patch_file=$2 prog=$3 cc=$4 ldlibs=$5
    shift 5
    name=$(basename "$patch_file" .diff)
    files=$(sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "$patch_file" | sort -u)
    case $files in
    *.c) ;;
    *) echo "pitfall $name: $patch_file must patch exactly one .c file (it names: ${files:-none})" >&2; exit 1;;
    esac
    [ "$(echo "$files" | wc -l)" -eq 1 ] || { echo "pitfall $name: $patch_file patches more than one file" >&2; exit 1; }
    objs= own=
    for o in "$@"; do
        case $o in */"${files%.c}.o") own=$o;; *) objs="$objs $o";; esac
    done
    [ -n "$own" ] || { echo "pitfall $name: $files is not a source of the program" >&2; exit 1; }
    # the copy's directory is named after the program (dflash-NAME: NAME;
    # a training pitfall's dflash-train-NAME: train-NAME), so two patches of
    # the same name in two series do not share one
    prog_leaf=$(basename "$prog")
    dir=$(dirname "$prog")/${prog_leaf#dflash-}
    rm -rf "$dir" && mkdir -p "$dir"
    mkdir -p "$dir/$(dirname "$files")"
    cp "$files" "$dir/$files"
    if ! patch --quiet --batch --fuzz=0 --no-backup-if-mismatch -p1 -d "$dir" -i "$(abspath "$patch_file")" \
            > "$dir/patch.log" 2>&1; then
        cat "$dir/patch.log" >&2
        rm -rf "$dir"
        echo "pitfall $name: $patch_file no longer applies to $files; make it again from the current $files" >&2
        exit 1
    fi
    rm -f "$dir/patch.log"
    # -I.: the copy includes the headers of the tree; -Wno-unused-function:
    # a mistake may leave a correct helper unused (gelu-mlp leaves silu)
    # shellcheck disable=SC2086
    $cc -Wno-unused-function -I. -c -o "$dir/${files%.c}.o" "$dir/$files"
    # A weak function of the patched file (dflash.c's attention, rmsnorm_rows,
    # apply_rotary_pos_emb) is replaced by kernel.c's where that is linked,
    # and the mistake with it: those symbols are made weak in a copy of the
    # object that defines them, so the patched file's (linked first) wins.
    # matmul is left to kernel.c (no mistake patches it; the pitfalls keep
    # the fast kernel).
    weak=$(nm --defined-only "$dir/${files%.c}.o" | awk '$2 == "W" && $3 != "matmul" { print $3 }')
    if [ -n "$weak" ]; then
        linked=
        for o in $objs; do
            hit=
            for sym in $weak; do
                nm --defined-only "$o" | awk -v s="$sym" '$3 == s && $2 ~ /^[Ti]$/ { f = 1 } END { exit !f }' && hit="$hit -W $sym"
            done
            if [ -n "$hit" ]; then
                # shellcheck disable=SC2086
                objcopy $hit "$o" "$dir/weak-$(basename "$o")" && o="$dir/weak-$(basename "$o")"
            fi
            linked="$linked $o"
        done
        objs=$linked
    fi
    # shellcheck disable=SC2086
    $cc -o "$prog" "$dir/${files%.c}.o" $objs $ldlibs
    ;;
refresh)
    patch_file=$2
    file=$(sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "$patch_file" | sort -u)
    [ -f "$file" ] || { echo "pitfall: $patch_file patches '$file', which is not a file here" >&2; exit 1; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/b/$(dirname "$file")"
    cp "$file" "$tmp/b/$file"
    patch --quiet --batch --no-backup-if-mismatch -p1 -d "$tmp/b" -i "$(abspath "$patch_file")" ||
        { echo "pitfall: $patch_file does not apply even with fuzz: make it again by hand" >&2; exit 1; }
    sed '/^--- a\//,$d' "$patch_file" > "$tmp/new.diff"
    rc=0
    diff -u -F '^[a-z].*(' --label "a/$file" --label "b/$file" "$file" "$tmp/b/$file" >> "$tmp/new.diff" || rc=$?
    [ $rc -eq 1 ] || { echo "pitfall: $patch_file changes nothing in $file any more" >&2; exit 1; }
    cat "$tmp/new.diff" > "$patch_file"
    echo "pitfall: rewrote $patch_file against the current $file"
    ;;
check-series)
    dir=$2 rc=0
    listed=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$dir/series")
    for n in $listed; do
        [ -f "$dir/$n.diff" ] || { echo "pitfalls: $dir/series lists $n, but there is no $dir/$n.diff" >&2; rc=1; }
    done
    for f in "$dir"/*.diff; do
        n=$(basename "$f" .diff)
        c=$(echo "$listed" | grep -c -x -e "$n" || true)
        [ "$c" -eq 1 ] || { echo "pitfalls: $f is listed $c times in $dir/series (once expected)" >&2; rc=1; }
    done
    exit $rc
    ;;
*)
    echo "usage: sh tools/pitfall.sh build PATCH PROGRAM 'CC FLAGS' 'LDLIBS' OBJECT... | check-series DIR" >&2
    exit 2
    ;;
esac
