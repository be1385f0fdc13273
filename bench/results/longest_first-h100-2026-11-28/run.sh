# c71: (1) F1-F3 with the query tiles in longest-first order (a source patch, .dev/lpt_bench.py) against the default,
# twice; (2) c70: the llm suite at HEAD, the GPU tests, ncu of F3
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
for run in 1 2; do
python .dev/lpt_bench.py bench --suite llm --cases F1,F2,F3 --systems eager,irforge --jobs 1 -o $R/lpt_$run \
  --variant "lpt=$P" --variant "lpt_bm128=$(V tile-blockify 'bm=128 threads=256' tile-chunk-reduce bk=128)" > $R/lpt_$run.log 2>&1
grep -E "^\| F" $R/lpt_$run/llm.md | cut -c1-300; echo "lpt run $run at $((SECONDS - t0)) s"
done
grep -E "lpt:|rror|Traceback" $R/lpt_1.log | head -8
timeout 150 python -m pytest -q -p no:cacheprovider -o addopts="" -n 8 tests/test_gpu.py tests/test_attention_mma.py -rfEs > $R/gputests.log 2>&1
echo "gpu tests rc=$? at $((SECONDS - t0)) s"; grep -E "passed|failed|^FAILED|^ERROR" $R/gputests.log | tail -5
ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis -c 2 -k regex:'^k_' \
  python -m irforge.tools.cli bench --suite llm --cases F3 --systems eager,irforge --reps 2 --warmup 1 > $R/ncu_f3.txt 2>&1
grep -E "^  k_|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall|Issued Ipc|Eligible Warps|No Eligible|Pipe" $R/ncu_f3.txt | head -50
echo "end $((SECONDS - t0)) s"
