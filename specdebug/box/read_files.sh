# Reads files ON THE BOX without python3 (the fallback when no resident helper runs).
# Run as: sh -c "$(cat read_files.sh)" sh MAX PATH...
# Prints, per path: `@ok I` and up to MAX bytes as base64 lines, or `@err I MESSAGE`
# (base64 never starts with @, so the framing cannot be confused with file content).
max=$1; shift; i=0
for p in "$@"; do
  if [ -r "$p" ] && [ ! -d "$p" ]; then
    printf '@ok %s\n' "$i"; head -c "$max" -- "$p" | base64
  else
    printf '@err %s %s\n' "$i" "$(if [ -d "$p" ]; then echo EISDIR; else head -c 0 -- "$p" 2>&1 | head -n 1; fi)"
  fi
  i=$((i+1))
done
