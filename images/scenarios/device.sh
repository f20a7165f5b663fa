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
    wr bar0 $OP_OFFSET $2; wr bar0 $OP_LENGTH $3; wr bar0 $OP_ARG $4; wr bar0 $CMD $1
    rd bar0 $STATUS; status=$val
    rd bar0 $RESULT; result=$val
}
# knobs JSON-FIELDS: sets fault knobs (and the wrong_version witness) and
# waits until the device shows them.
knobs() {
    device "{\"cmd\":\"set_knobs\",$1,\"wrong_version\":true}"
    wait_reg $VERSION $WRONG_MAJOR_VALUE
}
knobs_off() {
    device '{"cmd":"clear_knobs"}'
    wait_reg $VERSION $VERSION_VALUE
}
err() { echo $(( STATUS_DONE | STATUS_ERROR | $1 << STATUS_CODE_SHIFT )); }

# Identification; read-only registers ignore writes.
rd bar0 $MAGIC
check magic eq "$val" $MAGIC_VALUE
rd bar0 $VERSION
check version eq "$val" $VERSION_VALUE
wr bar0 $MAGIC 0x12345678
rd bar0 $MAGIC
check magic_is_read_only eq "$val" $MAGIC_VALUE

# SCRATCH holds what was written; COUNTER counts each read.
wr bar0 $SCRATCH 0xa5a55a5a
rd bar0 $SCRATCH
check scratch eq "$val" 0xa5a55a5a
rd bar0 $COUNTER; c0=$val
rd bar0 $COUNTER; c1=$val
rd bar0 $COUNTER; c2=$val
check counter_counts_each_read eq "($c1 == $c0 + 1) + ($c2 == $c0 + 2)" 2

# The operation registers read back what was written, CMD the last opcode.
wr bar2 0x0 0x64636261
rd bar2 0x0
check window_holds_data eq "$val" 0x64636261
op $OP_CRC32 0x0 0x4 0x0
check crc32_operation eq "($status == $STATUS_DONE) + ($result == 0xed82cd11)" 2
rd bar0 $CMD; cmd=$val
rd bar0 $OP_OFFSET; off=$val
rd bar0 $OP_LENGTH; len=$val
rd bar0 $OP_ARG; arg=$val
check operation_registers_read_back eq "($cmd == 1) + ($off == 0) + ($len == 4) + ($arg == 0)" 4
# FILL 8 bytes at 16 with 0x5a; INVERT them; look through the window.
op $OP_FILL 0x10 0x8 0x15a
rd bar2 0x10; w0=$val
rd bar2 0x14; w1=$val
check fill_operation eq "($status == $STATUS_DONE) + ($w0 == 0x5a5a5a5a) + ($w1 == 0x5a5a5a5a)" 3
op $OP_INVERT 0x10 0x4 0x0
rd bar2 0x10; w0=$val
rd bar2 0x14; w1=$val
check invert_operation eq "($status == $STATUS_DONE) + ($w0 == 0xa5a5a5a5) + ($w1 == 0x5a5a5a5a)" 3
rd bar0 $RESULT; before=$val

# Errors: STATUS = DONE | ERROR | code << 8, RESULT unchanged.
op 0x63 0x0 0x4 0x0
check bad_opcode eq "($status == $(err $ERR_BAD_OPCODE)) + ($result == $before)" 2
op $OP_CRC32 0xfff0 0x11 0x0
check bad_range eq "($status == $(err $ERR_BAD_RANGE)) + ($result == $before)" 2
knobs '"force_error":true'
op $OP_CRC32 0x0 0x4 0x0
check forced eq "($status == $(err $ERR_FORCED)) + ($result == $before)" 2
op 0x63 0x0 0x4 0x0
check bad_opcode_before_forced eq "$status" "$(err $ERR_BAD_OPCODE)"
op $OP_FILL 0xffff 0x2 0x0
check bad_range_before_forced eq "$status" "$(err $ERR_BAD_RANGE)"
knobs_off

# stuck_busy: the operation stays BUSY, a second doorbell is ignored (only
# CMD's read-back changes); clearing the knob completes the first one.
knobs '"stuck_busy":true'
op $OP_CRC32 0x0 0x4 0x0
check stuck_busy eq "$status" $STATUS_BUSY
op $OP_FILL 0x0 0x4 0xff
rd bar0 $CMD; cmd=$val
check doorbell_busy_ignored eq "($status == $STATUS_BUSY) + ($cmd == $OP_FILL)" 2
knobs_off
rd bar0 $STATUS; status=$val
rd bar0 $RESULT; result=$val
rd bar2 0x0; w0=$val
check stuck_operation_completes_on_clear eq "($status == $STATUS_DONE) + ($result == 0xed82cd11) + ($w0 == 0x64636261)" 3

# Interrupts: INT_ENABLE keeps bits 2:0; INT_RAISE latches INT_STATUS, an
# enabled rising edge counts in IRQ_COUNT once; INT_ACK clears.
wr bar0 $INT_ACK $INT_ALL
rd bar0 $IRQ_COUNT; irqs=$val
wr bar0 $INT_ENABLE 0xffffffff
rd bar0 $INT_ENABLE
check int_enable_keeps_three_bits eq "$val" $INT_ALL
wr bar0 $INT_ENABLE $INT_SOFT
wr bar0 $INT_RAISE $INT_SOFT
rd bar0 $INT_STATUS
check int_raise_latches eq "$val" $INT_SOFT
rd bar0 $IRQ_COUNT
check irq_counted_once eq "$val" "$irqs + 1"
wr bar0 $INT_RAISE $INT_SOFT
rd bar0 $IRQ_COUNT
check pending_source_raises_nothing_new eq "$val" "$irqs + 1"
wr bar0 $INT_STATUS 0x0
rd bar0 $INT_STATUS
check int_status_is_read_only eq "$val" $INT_SOFT
rd bar0 $INT_RAISE; raise=$val
rd bar0 $INT_ACK; ack=$val
check write_only_registers_read_zero eq "$raise + $ack" 0
wr bar0 $INT_ACK $INT_SOFT
rd bar0 $INT_STATUS
check int_ack_clears eq "$val" 0
wr bar0 $INT_RAISE $INT_SOFT
rd bar0 $IRQ_COUNT
check next_edge_counts eq "$val" "$irqs + 2"
wr bar0 $INT_ACK $INT_SOFT
# drop_irqs: the source latches, the edge is lost.
knobs '"drop_irqs":true'
wr bar0 $INT_RAISE $INT_SOFT
rd bar0 $INT_STATUS; st=$val
rd bar0 $IRQ_COUNT
check drop_irqs_loses_the_edge eq "($st == 4) + ($val == $irqs + 2)" 2
knobs_off
rd bar0 $IRQ_COUNT
check dropped_edge_stays_lost eq "$val" "$irqs + 2"
wr bar0 $INT_ACK $INT_SOFT

# 8, 16 and 64-bit accesses to BAR0: narrow reads see the addressed bytes
# (with the register's side effects), narrow writes are dropped; a 64-bit
# access is two registers, low offset first.
rd bar0 $MAGIC 8; b=$val
rd bar0 0x2 16; h=$val
check narrow_reads eq "($b == 0x67) + ($h == 0x7072)" 2
rd bar0 $COUNTER; c0=$val
rd bar0 $COUNTER 8
rd bar0 $COUNTER; c1=$val
check narrow_read_has_side_effects eq "$c1" "$c0 + 2"
wr bar0 $SCRATCH 0x11 8
rd bar0 $SCRATCH
check narrow_write_dropped eq "$val" 0xa5a55a5a
rd bar0 $MAGIC 64
check wide_read eq "$val" 0x0001000070726967
wr bar0 $SCRATCH 0x0000000012345678 64
rd bar0 $SCRATCH
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
for i in 1 2 3 4 5 6 7 8 9 10; do rd bar0 $SCRATCH; done
t1=$(cut -d' ' -f1 /proc/uptime | tr -d .)
echo "# latency: 10 reads in $(( (t1 - t0) * 10 )) ms"
check latency_delays_accesses [ $(( t1 - t0 )) -ge 20 ]
device_error '{"cmd":"set_knobs","latency_ns":100000001}'
knobs_off

# RESET: only the value 1 acts; it clears the registers, the window, the
# pending interrupt and IRQ_COUNT.
wr bar0 $INT_RAISE $INT_SOFT
wr bar0 $RESET 0x2
rd bar0 $SCRATCH
check reset_needs_its_key eq "$val" 0x12345678
wr bar0 $RESET $RESET_KEY
rd bar0 $SCRATCH; s=$val
rd bar0 $STATUS; st=$val
rd bar0 $INT_STATUS; is=$val
rd bar0 $IRQ_COUNT; n=$val
rd bar0 $INT_ENABLE; en=$val
rd bar2 0x0; w0=$val
rd bar2 0x28; w1=$val
check reset_clears eq "$s + $st + $is + $n + $en + $w0 + $w1" 0
rd bar0 $MAGIC
check identity_survives_reset eq "$val" $MAGIC_VALUE
