# c114: L4 and L1 (prefill linears whose grids are short of blocks) with the split-K shares combined through a
# cluster (one kernel) instead of partials (a second kernel) or no split: L4 c4 (4 shares, the default's, via a
# cluster), c4r3 (in rings of 3: 2 blocks a multiprocessor), c2r3 (2 shares); L1 c2r3 (2 shares, rings of 3)
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n')
mk() { echo "torch-to-tensor,tensor-to-loop,$(echo "$base" | sed "$1"),tile-to-kernel,kernel-to-cuda"; }
C4=$(mk 's/tile-split-reduce,/tile-split-reduce{via=cluster},/')
C4R3=$(mk 's/tile-split-reduce,/tile-split-reduce{splits=4 via=cluster},/;s/tile-multi-buffer,/tile-multi-buffer{stages=3},/')
C2R3=$(mk 's/tile-split-reduce,/tile-split-reduce{splits=2 via=cluster},/;s/tile-multi-buffer,/tile-multi-buffer{stages=3},/')
for i in 1 2; do
  timeout 200 python -m irforge.tools.cli bench --suite llm --cases L4,L4.f16,L1 --systems eager,irforge --variant "c4=$C4" --variant "c4r3=$C4R3" --variant "c2r3=$C2R3" -o $R/var$i > $R/var$i.log 2>&1
  grep -hE "^\| (L)[0-9]|^\| case" $R/var$i/llm.md | cut -c1-300
  grep -E "error|Error" $R/var$i.log | head -3
  echo "var $i $((SECONDS - t0)) s"
done
