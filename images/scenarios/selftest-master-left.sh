# A guest whose device stays a bus master after its binding ended: before
# the driver binds, user space enables the device (sysfs `enable`) and
# turns bus mastering on (the command register, through sysfs `config`), so
# the binding's disable only drops the enable count and leaves mastering on.
# The unbind scenario otherwise: only the device's config log can fail it.
check device_present find_dev
echo 1 > "$dev/enable"
cmd=$(( $(od -An -tu1 -j4 -N1 "$dev/config") | 4 ))
echo -ne "\\0$(printf %03o $cmd)" | dd of="$dev/config" bs=1 seek=4 count=1 conv=notrunc 2>/dev/null
. /scenarios/unbind.sh
