# c89: sliced decode attention with deeper rings (more bytes in flight a multiprocessor): F4, F6, two rounds
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
S=tile-split-reduce; M=tile-multi-buffer; C=tile-chunk-reduce
for round in 1 2; do
  timeout 250 $B --suite llm --cases F4,F6 --systems eager,irforge -o $R/rings$round \
    --variant "w4=$(V $S 'splits=4 across=warps')" \
    --variant "w4r3=$(V $S 'splits=4 across=warps' $M stages=3)" \
    --variant "w2r4=$(V $S 'splits=2 across=warps' $M stages=4)" \
    --variant "w2r6=$(V $S 'splits=2 across=warps' $M stages=6)" \
    --variant "w4c32r4=$(V $S 'splits=4 across=warps' $C bk=32 $M stages=4)" \
    --variant "w4c32r6=$(V $S 'splits=4 across=warps' $C bk=32 $M stages=6)" \
    --variant "w8c32r3=$(V $S 'splits=8 across=warps' $C bk=32 $M stages=3)" \
    --variant "w8c16r4=$(V $S 'splits=8 across=warps' $C bk=16 $M stages=4)" \
    --variant "w8c16r6=$(V $S 'splits=8 across=warps' $C bk=16 $M stages=6)" \
    > $R/rings$round.log 2>&1
  echo "== $round"; grep -E "^\| (case|F|L)" $R/rings$round/llm.md | cut -c1-700; grep -iE "error|refus|fail|mismatch" $R/rings$round.log | head -5
done
echo "bench $((SECONDS - t0)) s"
ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed -k regex:'^k_scaled_dot_product_attention' -c 4 \
  $B --suite llm --cases F4 --systems eager,irforge --reps 2 --warmup 0 > $R/ncu_default.txt 2>&1
grep -vE "^==PROF==|^\s*$|----" $R/ncu_default.txt | grep -E "^  k_|gpu__time|dram__" | head -30
echo "all $((SECONDS - t0)) s"
