# c82: does launching in clusters alone slow a kernel? The split's first kernel (partials, no remote memory) with
# and without __cluster_dims__ (an experiment patch, cluster_partial_patch.py), interleaved twice; ncu of F4's.
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
python .dev/cluster_partial_patch.py
B="python -m irforge.tools.cli bench"
for round in 1 2; do
  for mode in plain clustered; do
    if [ $mode = clustered ]; then export IRFORGE_CLUSTER_PARTIAL=1; else unset IRFORGE_CLUSTER_PARTIAL; fi
    timeout 100 $B --suite llm --cases F4,F6,L12 --systems eager,irforge --cache /tmp/cache_$mode -o $R/${mode}$round > $R/${mode}$round.log 2>&1
    echo "== $mode $round"; grep -E "^\| (F|L)" $R/${mode}$round/llm.md | cut -c1-200
    grep -c "__cluster_dims__" -r /tmp/cache_$mode 2>/dev/null | awk -F: '{s+=$2} END {print "cluster kernels in cache:", s}'
  done
done
for mode in plain clustered; do
  if [ $mode = clustered ]; then export IRFORGE_CLUSTER_PARTIAL=1; else unset IRFORGE_CLUSTER_PARTIAL; fi
  ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg -k regex:'_partial$' -c 2 \
    python -m irforge.tools.cli bench --suite llm --cases F4 --systems eager,irforge --cache /tmp/cache_$mode --reps 2 --warmup 0 > $R/ncu_$mode.txt 2>&1
  echo "== ncu $mode"; grep -E "^  k_|gpu__time_duration|dram__throughput|sm__cycles_active" $R/ncu_$mode.txt | head -8
done
echo "all $((SECONDS - t0)) s"
