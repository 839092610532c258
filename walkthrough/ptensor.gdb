# walkthrough/ptensor.gdb - gdb helpers to look at dflash.c's buffers.
# Plain gdb `define`s (while loops and printf), no Python needed.
#
#   source walkthrough/ptensor.gdb
#
#   ptensor EXPR ROWS COLS [ROW_STRIDE]
#       Print ROWS x COLS values of a row-major buffer, starting at EXPR (a
#       pointer to real, e.g. r->C or a->att + 1*B*S), with its shape. Rows
#       are ROW_STRIDE values apart (default COLS), so a window of a wider
#       matrix works: `ptensor r->C+36 Lc 6 D` is columns 36..41 of C.
#   pargmax EXPR N
#       The index and value of the largest of N values (first one on ties,
#       like torch.argmax), e.g. one row of attention weights.
#   pargmaxw EXPR N
#       The same over one row of logits, with the token's word.
#   ptokens EXPR N
#       N token ids (an int pointer) with its shape and, once `setwords` has
#       run, their words.
#   setwords
#       Remember main()'s vocabulary (vocab.words) as $words, for ptokens
#       and pword. Run it while the program is stopped anywhere below main.
#   pword ID
#       The word of one token id.
#
# Each helper keeps its state in convenience variables with its own prefix
# ($pt_, $pa_, $pk_), so they do not disturb each other.

define ptensor
  if $argc < 3
    echo usage: ptensor EXPR ROWS COLS [ROW_STRIDE]\n
  else
    set $pt_p = $arg0
    set $pt_rows = $arg1
    set $pt_cols = $arg2
    set $pt_stride = $pt_cols
    if $argc > 3
      set $pt_stride = $arg3
    end
    echo $arg0
    printf "  [%d, %d]", $pt_rows, $pt_cols
    if $pt_stride != $pt_cols
      printf "  (row stride %d)", $pt_stride
    end
    printf "\n"
    set $pt_i = 0
    while $pt_i < $pt_rows
      printf "  [%d]", $pt_i
      set $pt_j = 0
      while $pt_j < $pt_cols
        printf " %9.4f", $pt_p[$pt_i * $pt_stride + $pt_j]
        set $pt_j = $pt_j + 1
      end
      printf "\n"
      set $pt_i = $pt_i + 1
    end
  end
end
document ptensor
ptensor EXPR ROWS COLS [ROW_STRIDE]: print a ROWS x COLS window of a row-major
buffer starting at EXPR, rows ROW_STRIDE values apart (default COLS).
end

define pargmax
  if $argc != 2
    echo usage: pargmax EXPR N\n
  else
    set $pa_p = $arg0
    set $pa_best = 0
    set $pa_i = 1
    while $pa_i < $arg1
      if $pa_p[$pa_i] > $pa_p[$pa_best]
        set $pa_best = $pa_i
      end
      set $pa_i = $pa_i + 1
    end
    printf "argmax index %d, value %.4f\n", $pa_best, $pa_p[$pa_best]
  end
end
document pargmax
pargmax EXPR N: index and value of the largest of N values at EXPR (first on ties).
end

define pargmaxw
  if $argc != 2
    echo usage: pargmaxw EXPR N\n
  else
    set $pa_p = $arg0
    set $pa_best = 0
    set $pa_i = 1
    while $pa_i < $arg1
      if $pa_p[$pa_i] > $pa_p[$pa_best]
        set $pa_best = $pa_i
      end
      set $pa_i = $pa_i + 1
    end
    if $_isvoid($words)
      printf "argmax token %d, logit %.4f\n", $pa_best, $pa_p[$pa_best]
    else
      printf "argmax token %d (%s), logit %.4f\n", $pa_best, $words[$pa_best], $pa_p[$pa_best]
    end
  end
end
document pargmaxw
pargmaxw EXPR N: pargmax over N logits, with the token's word (after setwords).
end

define setwords
  select-frame function main
  set $words = vocab.words
  set $n_words = vocab.n
  select-frame 0
end
document setwords
setwords: remember main()'s vocab.words as $words (for ptokens and pword).
end

define pword
  if $_isvoid($words)
    echo (run setwords first)\n
  else
    printf "%s\n", $words[$arg0]
  end
end
document pword
pword ID: the word of token ID (after setwords).
end

define ptokens
  if $argc != 2
    echo usage: ptokens EXPR N\n
  else
    set $pk_p = $arg0
    set $pk_i = 0
    echo $arg0
    printf "  [%d]\n", $arg1
    printf "  ids:  "
    while $pk_i < $arg1
      printf " %d", $pk_p[$pk_i]
      set $pk_i = $pk_i + 1
    end
    printf "\n"
    if !$_isvoid($words)
      set $pk_i = 0
      printf "  words:"
      while $pk_i < $arg1
        printf " %s", $words[$pk_p[$pk_i]]
        set $pk_i = $pk_i + 1
      end
      printf "\n"
    end
  end
end
document ptokens
ptokens EXPR N: N token ids at EXPR, and their words once setwords has run.
end
