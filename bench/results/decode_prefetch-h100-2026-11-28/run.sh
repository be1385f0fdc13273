# c74: decode attention F4/F6 with chunks of 32 keys and deeper rings (more chunks in flight in the same shared
# memory), with 2, 4 (default) and 8 splits of the keys; twice
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
for run in 1 2; do
timeout 200 python -m irforge.tools.cli bench --suite llm --cases F4,F6 --systems eager,irforge -o $R/decode_$run \
  --variant "bk32r4=$(V tile-chunk-reduce bk=32 tile-multi-buffer stages=4)" \
  --variant "bk32r6=$(V tile-chunk-reduce bk=32 tile-multi-buffer stages=6)" \
  --variant "s2bk32r4=$(V tile-split-reduce splits=2 tile-chunk-reduce bk=32 tile-multi-buffer stages=4)" \
  --variant "s8bk32r4=$(V tile-split-reduce splits=8 tile-chunk-reduce bk=32 tile-multi-buffer stages=4)" \
  --variant "bk16r8=$(V tile-chunk-reduce bk=16 tile-multi-buffer stages=8)" > $R/decode_$run.log 2>&1
grep -E "^\| (case|F)" $R/decode_$run/llm.md | cut -c1-500; grep -iE "refus|error" $R/decode_$run.log | head -5; echo "run $run at $((SECONDS - t0)) s"
done
