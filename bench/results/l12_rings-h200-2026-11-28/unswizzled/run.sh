# c112: L12 with longer runs of each weight row copied by the tensor memory accelerator unswizzled (its swizzled
# boxes are at most 128 bytes wide): u64 (the default's chunks of 64, unswizzled: the bank conflicts alone), u128n64
# (chunks of 128: 256-byte runs, 4 shares, 64 columns a block: 56 x 4 blocks), u128 (the same, 128 columns: 28 x 4),
# u256n64 (chunks of 256: 512-byte runs, 2 shares, 64 columns: 56 x 2); two rounds
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n')
mk() { echo "torch-to-tensor,tensor-to-loop,$(echo "$base" | sed "$1"),tile-to-kernel,kernel-to-cuda"; }
U='s/tile-tma,/tile-tma{stages=all},/;s/tile-swizzle-smem,/tile-swizzle-smem{swizzle=0,0,0},/'
U64=$(mk "$U")
U128N64=$(mk "s/tile-chunk-reduce,/tile-chunk-reduce{bk=128},/;s/tile-split-reduce,/tile-split-reduce{splits=4},/;s/tile-blockify,/tile-blockify{bn=64},/;$U")
U128=$(mk "s/tile-chunk-reduce,/tile-chunk-reduce{bk=128},/;s/tile-split-reduce,/tile-split-reduce{splits=4},/;$U")
U256N64=$(mk "s/tile-chunk-reduce,/tile-chunk-reduce{bk=256},/;s/tile-split-reduce,/tile-split-reduce{splits=2},/;s/tile-blockify,/tile-blockify{bn=64},/;$U")
for i in 1 2; do
  timeout 200 python -m irforge.tools.cli bench --suite llm --cases L12 --systems eager,irforge --variant "u64=$U64" --variant "u128n64=$U128N64" --variant "u128=$U128" --variant "u256n64=$U256N64" -o $R/var$i > $R/var$i.log 2>&1
  grep -hE "^\| (L)[0-9]|^\| case" $R/var$i/llm.md | cut -c1-300
  echo "var $i $((SECONDS - t0)) s"
done
