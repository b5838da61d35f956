# bench/cuda/lib.sh: helpers the bench/cuda scripts source.
# hcol N: column N of the cuda-only row of `hybrid bench`'s table on stdin
# (4: prompt tok/s, 5: decode tok/s).
hcol() { grep -E "^\| cuda-only" | awk -F'|' -v c="$1" '{gsub(/ /, "", $c); print $c}'; }
