# c72: at 9ddab6c (tile-longest-first in the default lowering): the whole llm suite, seed84's attention cases, the
# GPU tests of attention, and decode attention F4/F6 against key-split and chunk variants
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
$B --suite llm --compile-only --cache /tmp/cache --jobs 16 > $R/compile_llm.log 2>&1; tail -1 $R/compile_llm.log
timeout 240 $B --suite llm --cache /tmp/cache --systems eager,irforge -o $R/llm > $R/llm.log 2>&1
grep -E "geomean" $R/llm/llm.md; grep -E "^\| (F[1-6]|L4|L12|D[1-4]) " $R/llm/llm.md | cut -c1-200
echo "llm $((SECONDS - t0)) s"
timeout 100 $B --suite seed84 --cases 'sdpa.*,naive_attn.*' --systems eager,irforge -o $R/seed_attn > $R/seed_attn.log 2>&1
grep -E "^\| (sdpa|naive)" $R/seed_attn/seed84.md | cut -c1-200; echo "seed attn $((SECONDS - t0)) s"
timeout 120 $B --suite llm --cases F4,F6 --systems eager,irforge -o $R/decode \
  --variant "s8=$(V tile-split-reduce splits=8)" --variant "bk32=$(V tile-chunk-reduce bk=32)" \
  --variant "s8bk32=$(V tile-split-reduce splits=8 tile-chunk-reduce bk=32)" \
  --variant "s8bk32r3=$(V tile-split-reduce splits=8 tile-chunk-reduce bk=32 tile-multi-buffer stages=3)" > $R/decode.log 2>&1
grep -E "^\| (case|F)" $R/decode/llm.md | cut -c1-400; grep -iE "refus|error" $R/decode.log | head -5; echo "decode $((SECONDS - t0)) s"
timeout 90 python -m pytest -q -p no:cacheprovider -o addopts="" -n 8 tests/test_attention_mma.py tests/test_longest_first.py -rfEs > $R/gputests.log 2>&1
echo "gpu tests rc=$? at $((SECONDS - t0)) s"; grep -E "passed|failed|^FAILED|^ERROR" $R/gputests.log | tail -5
