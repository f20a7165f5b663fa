# A guest that never powers off: the harness must time out.
marker hanging on purpose
while :; do sleep 3600; done
