# c124: decode attention F4-F6 with its keys split across blocks (a cluster's or partials' combine) against the
# default (a block's 4 warps sharing them), twice
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n')
mk() { echo "torch-to-tensor,tensor-to-loop,$(echo "$base" | sed "$1"),tile-to-kernel,kernel-to-cuda"; }
C2=$(mk 's/tile-split-reduce,/tile-split-reduce{splits=2 across=blocks via=cluster},/')
C4=$(mk 's/tile-split-reduce,/tile-split-reduce{splits=4 across=blocks via=cluster},/')
P2=$(mk 's/tile-split-reduce,/tile-split-reduce{splits=2 across=blocks via=partials},/')
for i in 1 2; do
  timeout 200 python -m irforge.tools.cli bench --suite llm --cases F4,F5,F6 --systems eager,irforge --variant "c2=$C2" --variant "c4=$C4" --variant "p2=$P2" -o $R/var$i > $R/var$i.log 2>&1
  grep -hE "^\| (F)[0-9]|^\| case" $R/var$i/llm.md | cut -c1-250
  echo "var $i $((SECONDS - t0)) s"
done
