# c117: a run of stage copies waited for once (this tree: decode attention's V, K and Q slabs copied together)
# against 46fac3f (.dev/base.tgz: a --target install of it): TinyLlama's decode step (head2: 46fac3f's build;
# runs: this tree's), both in one process, twice; D1, D2 base/new interleaved twice; ncu of the decode step's
# attention and norm kernels inside the graph
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
mkdir -p /tmp/old && tar xzf .dev/base.tgz -C /tmp/old
NEW=$PWD
export IRFORGE_CACHE_DIR=$NEW/.dev/mb/cache
for i in 1 2; do
  timeout 150 python bench/decode_sweep.py step head2=.dev/mb/head2/tinyllama-bf16.json runs=.dev/mb/runs/tinyllama-bf16.json --profile --rounds 7 --json $R/step$i.json > $R/step$i.log 2>&1
  grep -hE "decode step|scaled_dot|mul_mean|kernels " $R/step$i.log | cut -c1-150
  echo "step $i $((SECONDS - t0)) s"
done
unset IRFORGE_CACHE_DIR
B="python -m irforge.tools.cli bench --suite llm --cases D1,D2 --systems eager,irforge"
for i in 1 2; do
  (cd /tmp && PYTHONPATH=/tmp/old:/tmp/site timeout 120 $B -o $R/base$i > $R/base$i.log 2>&1)
  timeout 120 $B -o $R/new$i > $R/new$i.log 2>&1
  grep -hE "^\| (D)[0-9]" $R/base$i/llm.md $R/new$i/llm.md | cut -c1-200
  echo "bench $i $((SECONDS - t0)) s"
done
export IRFORGE_CACHE_DIR=$NEW/.dev/mb/cache
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats"
timeout 200 ncu --graph-profiling node $S --launch-skip 66 -c 8 -k regex:'layer_k_(scaled_dot_product_attention|mul_mean|linear)$' python bench/decode_sweep.py step runs=.dev/mb/runs/tinyllama-bf16.json --rounds 1 --reps 1 > $R/ncu_step.txt 2>&1
grep -E "^  layer_k|Duration|Grid Size|Block Size|DRAM Throughput|Eligible Warps|No Eligible|Warp Cycles Per Issued" $R/ncu_step.txt | head -60
echo "all $((SECONDS - t0)) s"
