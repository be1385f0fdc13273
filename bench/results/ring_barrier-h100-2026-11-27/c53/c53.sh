timeout 500 python .dev/c53.py > $R/c53.log 2>&1; echo "rc=$?"; grep -v Warning $R/c53.log | grep -v "return forward" | tail -12
