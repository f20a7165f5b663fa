# device: our PCI device's registers (qemu-device/REGISTERS.md) read and
# written from user space through /dev/mem, no driver bound. Every access is
# reported as `# mmio r|w REGION OFFSET SIZE VALUE`; the host finds each one,
# in order and with its value, in the device's own access log.
ktap_plan 11
check device_present find_dev
if [ -n "$dev" ]; then
    echo 1 > "$dev/enable"
    bar0=$(( $(sed -n 1p "$dev/resource" | cut -d' ' -f1) ))
    bar2=$(( $(sed -n 3p "$dev/resource" | cut -d' ' -f1) ))
    echo "# device $dev bar0 $(printf 0x%x $bar0) bar2 $(printf 0x%x $bar2)"
fi
base() { if [ "$1" = bar2 ]; then echo $bar2; else echo $bar0; fi; }
rd() { val=$(devmem $(( $(base $1) + $2 )) 32); echo "# mmio r $1 $2 4 $val"; }
wr() { devmem $(( $(base $1) + $2 )) 32 $3; echo "# mmio w $1 $2 4 $3"; }
eq() { [ $(( $1 )) -eq $(( $2 )) ]; }

rd bar0 0x0
check magic eq "$val" 0x70726967
rd bar0 0x4
check version eq "$val" 0x00010000
wr bar0 0x8 0xa5a55a5a
rd bar0 0x8
check scratch eq "$val" 0xa5a55a5a
rd bar0 0xc; c0=$val
rd bar0 0xc; c1=$val
rd bar0 0xc; c2=$val
check counter_counts_reads eq "$c1 + $c2" "2 * $c0 + 3"
wr bar2 0x0 0x64636261
rd bar2 0x0
check window_holds_data eq "$val" 0x64636261
# CRC32 of "abcd" at BAR2 offset 0.
wr bar0 0x18 0x0; wr bar0 0x1c 0x4; wr bar0 0x10 0x1
rd bar0 0x14; status=$val
rd bar0 0x24
check crc32_operation eq "$status * 0x100000000 + $val" "0x2 * 0x100000000 + 0xed82cd11"
# FILL 8 bytes at offset 16 with 0x5a, then look at them through the window.
wr bar0 0x18 0x10; wr bar0 0x1c 0x8; wr bar0 0x20 0x5a; wr bar0 0x10 0x2
rd bar0 0x14; status=$val
rd bar2 0x10; w0=$val
rd bar2 0x14; w1=$val
check fill_operation eq "($status == 2) + ($w0 == 0x5a5a5a5a) + ($w1 == 0x5a5a5a5a)" 3
# An unknown opcode: STATUS = DONE | ERROR | BAD_OPCODE << 8.
wr bar0 0x10 0x63
rd bar0 0x14
check bad_opcode_is_an_error eq "$val" 0x106
rd bar0 0x100
check undefined_offset_reads_zero eq "$val" 0
wr bar0 0x50 0x1
rd bar0 0x8; s=$val
rd bar0 0x14
check reset_clears eq "$s + $val" 0
