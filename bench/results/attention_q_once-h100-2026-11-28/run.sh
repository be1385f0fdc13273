# c76: attention's Q fragments read once before the loop over chunks of keys (flash.before_keys) against reading
# them every chunk (the previous lowering, .dev/old), F1-F3 and D4, in the same call: new, old, new
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --cases F1,F2,F3,D4 --systems eager,irforge"
mkdir -p /tmp/new && cp passes/tile_to_kernel/flash.py passes/tile_to_kernel/lower_to_kernel.py /tmp/new/
for run in new1 old new2; do
  if [ $run = old ]; then cp .dev/old/*.py passes/tile_to_kernel/; else cp /tmp/new/*.py passes/tile_to_kernel/; fi
  timeout 150 $B -o $R/$run > $R/$run.log 2>&1
  grep -E "^\| (F|D)" $R/$run/llm.md | cut -c1-200; echo "$run at $((SECONDS - t0)) s"
done
cp /tmp/new/*.py passes/tile_to_kernel/
