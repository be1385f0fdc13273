# c109: decode attention on the mma atoms' top halves with their accumulators in place (ghost rows' registers of
# their own) and Q's fragments read once before the loop over chunks (this tree), against 345e855 (.dev/base.tgz: a
# --target install of it and its bench/): F4-F6, D1, D2, base and new interleaved twice; TinyLlama's decode step
# (head: 345e855's build, run by 345e855's code; ghost: this tree's), interleaved twice; ncu of the new F4 kernel
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
mkdir -p /tmp/old && tar xzf .dev/base.tgz -C /tmp/old
NEW=$PWD
B="python -m irforge.tools.cli bench --suite llm --cases F4,F5,F6,D1,D2 --systems eager,irforge"
for i in 1 2; do
  (cd /tmp && PYTHONPATH=/tmp/old:/tmp/site timeout 150 $B -o $R/base$i > $R/base$i.log 2>&1)
  timeout 150 $B -o $R/new$i > $R/new$i.log 2>&1
  grep -hE "^\| (F|D)[0-9]" $R/base$i/llm.md $R/new$i/llm.md | cut -c1-230
  echo "bench $i $((SECONDS - t0)) s"
done
export IRFORGE_CACHE_DIR=$NEW/.dev/mb/cache
for i in 1 2; do
  (cd /tmp && PYTHONPATH=/tmp/old:/tmp/site timeout 120 python /tmp/old/bench/decode_sweep.py step head=$NEW/.dev/mb/head/tinyllama-bf16.json --profile --rounds 7 --json $R/head$i.json > $R/head$i.log 2>&1)
  timeout 120 python bench/decode_sweep.py step ghost=.dev/mb/ghost/tinyllama-bf16.json --profile --rounds 7 --json $R/ghost$i.json > $R/ghost$i.log 2>&1
  grep -hE "decode step|scaled_dot" $R/head$i.log $R/ghost$i.log
  echo "step $i $((SECONDS - t0)) s"
done
unset IRFORGE_CACHE_DIR
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats"
timeout 150 ncu $S -c 4 -k regex:'^k_' python -m irforge.tools.cli bench --suite llm --cases F4 --systems eager,irforge --reps 2 --warmup 1 > $R/ncu_F4.txt 2>&1
grep -E "Duration|DRAM Throughput|Registers Per|Eligible Warps|No Eligible|Issued Warp|Warp Cycles Per Issued|Executed Instructions " $R/ncu_F4.txt | head -20
echo "all $((SECONDS - t0)) s"
