# device: the whole register contract of our PCI device
# (qemu-device/REGISTERS.md) from user space through /dev/mem, no driver
# bound. Every access is reported as `# mmio r|w REGION OFFSET SIZE VALUE`;
# the host requires the device's own access log to hold exactly these, in
# order, with their values. Fault knobs are set by the host when asked
# (`device {json}`); each request also sets wrong_version, whose VERSION the
# guest polls, so it knows the knobs are in place before it goes on.
#
# Not covered here: MSI. Delivering one needs a kernel driver that enables
# MSI and owns the vector (uio_pci_generic is INTx only, and busybox has no
# VFIO client); the device model's unit tests and REGISTERS.md's "What was
# verified" cover it. Unaligned and odd-sized accesses: QEMU's memory core
# decides whether they reach the device at all, so they are unit-tested in
# the model only.
check device_present find_dev
if [ -n "$dev" ]; then
    bars
    echo "# device $dev bar0 $(printf 0x%x $bar0) bar2 $(printf 0x%x $bar2)"
    # INTx disable (command register bit 10): raised interrupts must not
    # reach a guest with no handler for them; IRQ_COUNT counts them anyway.
    intx_mask 1
fi
eq() { [ $(( $1 )) -eq $(( $2 )) ]; }
# op OPCODE OFFSET LENGTH ARG: runs an operation; sets $status and $result.
op() {
    wr bar0 0x18 $2; wr bar0 0x1c $3; wr bar0 0x20 $4; wr bar0 0x10 $1
    rd bar0 0x14; status=$val
    rd bar0 0x24; result=$val
}
# knobs JSON-FIELDS: sets fault knobs (and the wrong_version witness) and
# waits until the device shows them.
knobs() {
    device "{\"cmd\":\"set_knobs\",$1,\"wrong_version\":true}"
    wait_reg 0x4 0x00020000
}
knobs_off() {
    device '{"cmd":"clear_knobs"}'
    wait_reg 0x4 0x00010000
}
err() { echo $(( 0x6 | $1 << 8 )); }

# Identification; read-only registers ignore writes.
rd bar0 0x0
check magic eq "$val" 0x70726967
rd bar0 0x4
check version eq "$val" 0x00010000
wr bar0 0x0 0x12345678
rd bar0 0x0
check magic_is_read_only eq "$val" 0x70726967

# SCRATCH holds what was written; COUNTER counts each read.
wr bar0 0x8 0xa5a55a5a
rd bar0 0x8
check scratch eq "$val" 0xa5a55a5a
rd bar0 0xc; c0=$val
rd bar0 0xc; c1=$val
rd bar0 0xc; c2=$val
check counter_counts_each_read eq "($c1 == $c0 + 1) + ($c2 == $c0 + 2)" 2

# The operation registers read back what was written, CMD the last opcode.
wr bar2 0x0 0x64636261
rd bar2 0x0
check window_holds_data eq "$val" 0x64636261
op 0x1 0x0 0x4 0x0
check crc32_operation eq "($status == 2) + ($result == 0xed82cd11)" 2
rd bar0 0x10; cmd=$val
rd bar0 0x18; off=$val
rd bar0 0x1c; len=$val
rd bar0 0x20; arg=$val
check operation_registers_read_back eq "($cmd == 1) + ($off == 0) + ($len == 4) + ($arg == 0)" 4
# FILL 8 bytes at 16 with 0x5a; INVERT them; look through the window.
op 0x2 0x10 0x8 0x15a
rd bar2 0x10; w0=$val
rd bar2 0x14; w1=$val
check fill_operation eq "($status == 2) + ($w0 == 0x5a5a5a5a) + ($w1 == 0x5a5a5a5a)" 3
op 0x3 0x10 0x4 0x0
rd bar2 0x10; w0=$val
rd bar2 0x14; w1=$val
check invert_operation eq "($status == 2) + ($w0 == 0xa5a5a5a5) + ($w1 == 0x5a5a5a5a)" 3
rd bar0 0x24; before=$val

# Errors: STATUS = DONE | ERROR | code << 8, RESULT unchanged.
op 0x63 0x0 0x4 0x0
check bad_opcode eq "($status == $(err 1)) + ($result == $before)" 2
op 0x1 0xfff0 0x11 0x0
check bad_range eq "($status == $(err 2)) + ($result == $before)" 2
knobs '"force_error":true'
op 0x1 0x0 0x4 0x0
check forced eq "($status == $(err 3)) + ($result == $before)" 2
op 0x63 0x0 0x4 0x0
check bad_opcode_before_forced eq "$status" "$(err 1)"
op 0x2 0xffff 0x2 0x0
check bad_range_before_forced eq "$status" "$(err 2)"
knobs_off

# stuck_busy: the operation stays BUSY, a second doorbell is ignored (only
# CMD's read-back changes); clearing the knob completes the first one.
knobs '"stuck_busy":true'
op 0x1 0x0 0x4 0x0
check stuck_busy eq "$status" 0x1
op 0x2 0x0 0x4 0xff
rd bar0 0x10; cmd=$val
check doorbell_busy_ignored eq "($status == 1) + ($cmd == 2)" 2
knobs_off
rd bar0 0x14; status=$val
rd bar0 0x24; result=$val
rd bar2 0x0; w0=$val
check stuck_operation_completes_on_clear eq "($status == 2) + ($result == 0xed82cd11) + ($w0 == 0x64636261)" 3

# Interrupts: INT_ENABLE keeps bits 2:0; INT_RAISE latches INT_STATUS, an
# enabled rising edge counts in IRQ_COUNT once; INT_ACK clears.
wr bar0 0x3c 0x7
rd bar0 0x40; irqs=$val
wr bar0 0x34 0xffffffff
rd bar0 0x34
check int_enable_keeps_three_bits eq "$val" 0x7
wr bar0 0x34 0x4
wr bar0 0x38 0x4
rd bar0 0x30
check int_raise_latches eq "$val" 0x4
rd bar0 0x40
check irq_counted_once eq "$val" "$irqs + 1"
wr bar0 0x38 0x4
rd bar0 0x40
check pending_source_raises_nothing_new eq "$val" "$irqs + 1"
wr bar0 0x30 0x0
rd bar0 0x30
check int_status_is_read_only eq "$val" 0x4
rd bar0 0x38; raise=$val
rd bar0 0x3c; ack=$val
check write_only_registers_read_zero eq "$raise + $ack" 0
wr bar0 0x3c 0x4
rd bar0 0x30
check int_ack_clears eq "$val" 0
wr bar0 0x38 0x4
rd bar0 0x40
check next_edge_counts eq "$val" "$irqs + 2"
wr bar0 0x3c 0x4
# drop_irqs: the source latches, the edge is lost.
knobs '"drop_irqs":true'
wr bar0 0x38 0x4
rd bar0 0x30; st=$val
rd bar0 0x40
check drop_irqs_loses_the_edge eq "($st == 4) + ($val == $irqs + 2)" 2
knobs_off
rd bar0 0x40
check dropped_edge_stays_lost eq "$val" "$irqs + 2"
wr bar0 0x3c 0x4

# 8, 16 and 64-bit accesses to BAR0: narrow reads see the addressed bytes
# (with the register's side effects), narrow writes are dropped; a 64-bit
# access is two registers, low offset first.
rd bar0 0x0 8; b=$val
rd bar0 0x2 16; h=$val
check narrow_reads eq "($b == 0x67) + ($h == 0x7072)" 2
rd bar0 0xc; c0=$val
rd bar0 0xc 8
rd bar0 0xc; c1=$val
check narrow_read_has_side_effects eq "$c1" "$c0 + 2"
wr bar0 0x8 0x11 8
rd bar0 0x8
check narrow_write_dropped eq "$val" 0xa5a55a5a
rd bar0 0x0 64
check wide_read eq "$val" 0x0001000070726967
wr bar0 0x8 0x0000000012345678 64
rd bar0 0x8
check wide_write eq "$val" 0x12345678
# BAR2 is plain memory for any size.
wr bar2 0x20 0x11 8
wr bar2 0x22 0x3322 16
rd bar2 0x20
check window_narrow_writes eq "$val" 0x33220011
wr bar2 0x28 0x8877665544332211 64
rd bar2 0x2c
check window_wide_write eq "$val" 0x88776655
rd bar0 0x100
check undefined_offset_reads_zero eq "$val" 0

# latency_ns: every BAR access answered that much later (10 reads of
# 20 ms); one above the 100 ms bound is refused by the device.
knobs '"latency_ns":20000000'
t0=$(cut -d' ' -f1 /proc/uptime | tr -d .)
for i in 1 2 3 4 5 6 7 8 9 10; do rd bar0 0x8; done
t1=$(cut -d' ' -f1 /proc/uptime | tr -d .)
echo "# latency: 10 reads in $(( (t1 - t0) * 10 )) ms"
check latency_delays_accesses [ $(( t1 - t0 )) -ge 20 ]
device_error '{"cmd":"set_knobs","latency_ns":100000001}'
knobs_off

# RESET: only the value 1 acts; it clears the registers, the window, the
# pending interrupt and IRQ_COUNT.
wr bar0 0x38 0x4
wr bar0 0x50 0x2
rd bar0 0x8
check reset_needs_its_key eq "$val" 0x12345678
wr bar0 0x50 0x1
rd bar0 0x8; s=$val
rd bar0 0x14; st=$val
rd bar0 0x30; is=$val
rd bar0 0x40; n=$val
rd bar0 0x34; en=$val
rd bar2 0x0; w0=$val
rd bar2 0x28; w1=$val
check reset_clears eq "$s + $st + $is + $n + $en + $w0 + $w1" 0
rd bar0 0x0
check identity_survives_reset eq "$val" 0x70726967
