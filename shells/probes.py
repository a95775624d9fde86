"""Shell snippets that read the host the way `top` would, shared by the verifier and
the baseline agent (both run them through their own sessions)."""

# Every process's CPU use over half a second, one "pid comm percent-of-a-core" line
# each, from two samples of /proc/*/stat (no top needed, no terminal either).
CPU_SAMPLE = r"""
snap() { for f in /proc/[0-9]*/stat; do read -r l < "$f" 2>/dev/null && echo "$l"; done; }
a=$(mktemp); b=$(mktemp); snap > "$a"; sleep 0.5; snap > "$b"
awk -v hz="$(getconf CLK_TCK)" '{ match($0, /\(.*\)/); c = substr($0, RSTART + 1, RLENGTH - 2);
  split(substr($0, RSTART + RLENGTH + 1), f, " "); t = f[12] + f[13] }
  FNR == NR { a[$1] = t; next }
  ($1 in a) { p = (t - a[$1]) * 200 / hz; if (p > 0) printf "%s %s %d\n", $1, c, p }' "$a" "$b"
rm -f "$a" "$b"
"""
