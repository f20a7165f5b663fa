# A guest that makes the device DMA after its driver's binding ended: the
# unbind scenario, then user space points the DMA engine at the coherent
# buffer the driver had (its address from the driver's `# dma map 1` line),
# turns bus mastering back on and starts a DMA that reads it. Every access is
# reported, so the accounting passes: only the DMA oracle can tell.
. /scenarios/unbind.sh
bars
iova=$(dmesg | sed -n 's/.*# dma map 1 coherent \(0x[0-9a-f]*\) .*/\1/p' | tail -n 1)
# Bus mastering on: command register bit 2 (config byte 4).
lo=$(( $(od -An -tu1 -j4 -N1 "$dev/config") | 4 ))
echo -ne "\\0$(printf %03o $lo)" | dd of="$dev/config" bs=1 seek=4 count=1 conv=notrunc 2>/dev/null
wr bar0 $DMA_ADDR_LO $(( iova & 0xffffffff ))
wr bar0 $DMA_ADDR_HI $(( iova >> 32 ))
wr bar0 $OP_OFFSET 0
wr bar0 $OP_LENGTH 1024
wr bar0 $CMD $OP_DMA_TO_DEVICE
settle
