# c111: L12 (and L12.f16, L11) with deeper rings than the default's 3 (prefetch 2): 4, 5, 6 slots, two rounds
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n')
mk() { echo "torch-to-tensor,tensor-to-loop,$(echo "$base" | sed "$1"),tile-to-kernel,kernel-to-cuda"; }
R4=$(mk 's/tile-multi-buffer,/tile-multi-buffer{stages=4},/')
R5=$(mk 's/tile-multi-buffer,/tile-multi-buffer{stages=5},/')
R6=$(mk 's/tile-multi-buffer,/tile-multi-buffer{stages=6},/')
for i in 1 2; do
  timeout 200 python -m irforge.tools.cli bench --suite llm --cases L12,L12.f16,L11 --systems eager,irforge --variant "r4=$R4" --variant "r5=$R5" --variant "r6=$R6" -o $R/var$i > $R/var$i.log 2>&1
  grep -hE "^\| (L)[0-9]|^\| case" $R/var$i/llm.md | cut -c1-250
  echo "var $i $((SECONDS - t0)) s"
done
