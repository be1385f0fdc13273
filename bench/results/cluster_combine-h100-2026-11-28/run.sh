# c79: the cluster combine (one kernel: split blocks fold through distributed shared memory) against the second
# kernel (via=partials, the old default for these kernels): every case whose default now has a cluster kernel
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
timeout 200 $B --suite llm --cases F4,F5,F6,L4,L12,L4.f16,L12.f16 --systems eager,irforge -o $R/llm_cluster \
  --variant "partials=$(V tile-split-reduce via=partials)" > $R/llm_cluster.log 2>&1
grep -E "^\| (case|F|L)" $R/llm_cluster/llm.md | cut -c1-300; grep -iE "refus|error|Traceback" $R/llm_cluster.log | head -5; echo "llm $((SECONDS - t0)) s"
timeout 150 $B --suite seed84 --cases 'sdpa.*,naive_attn.*' --systems eager,irforge -o $R/seed_cluster \
  --variant "partials=$(V tile-split-reduce via=partials)" > $R/seed_cluster.log 2>&1
grep -E "^\| (case|sdpa|naive)" $R/seed_cluster/seed84.md | cut -c1-300; echo "seed $((SECONDS - t0)) s"
ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed -k regex:'^k_' -c 4 \
  python -m irforge.tools.cli bench --suite llm --cases F4 --systems eager,irforge --reps 3 --warmup 1 > $R/ncu_F4.txt 2>&1
grep -E "^  k_|gpu__time_duration|dram__throughput" $R/ncu_F4.txt | head -12; echo "ncu $((SECONDS - t0)) s"
timeout 120 python -m pytest -q -p no:cacheprovider -o addopts="" -n 8 tests/test_attention_mma.py tests/test_gpu.py tests/test_lower_to_kernel.py -rfEs > $R/gputests.log 2>&1
echo "gpu tests rc=$? at $((SECONDS - t0)) s"; grep -E "passed|failed|^FAILED|^ERROR" $R/gputests.log | tail -5
