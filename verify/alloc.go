package verify

import (
	"errors"
	"fmt"
	"math"

	"hybrid/devices"
)

// Allocator checks dev's memory half (devices.Allocator) against its
// contract: an allocation is counted in MemoryUsed and Free gives it back,
// views share their base's memory, and freeing a view, a freed buffer or
// another device's buffer is an error. other is a device of another kind or
// instance whose buffer dev must refuse (nil to skip that check).
func Allocator(dev, other devices.Device) Result {
	r := Result{Part: "memory", Name: "alloc/view/free", Metric: "bytes not given back"}
	if err := checkAllocator(dev, other, &r.Err); err != nil {
		r.Status, r.Note = Fail, err.Error()
		return r
	}
	r.Status = Pass
	return r
}

func checkAllocator(dev, other devices.Device, leaked *float64) error {
	const n = 1 << 16
	before := dev.MemoryUsed()
	b, err := dev.Alloc(n)
	if err != nil {
		return err
	}
	if grew := dev.MemoryUsed() - before; grew < 4*n {
		return fmt.Errorf("an allocation of %d floats grew MemoryUsed by %d bytes", n, grew)
	}
	v, err := dev.View(b, 3)
	if err != nil {
		return err
	}
	if err := dev.Write(v, []float32{1, 2, 3}); err != nil {
		return err
	}
	got := make([]float32, 4)
	if err := dev.Read(got, b); err != nil {
		return err
	}
	if got[0] != 1 || got[2] != 3 {
		return fmt.Errorf("a view does not share its buffer's memory: read %v", got)
	}
	if err := dev.Free(v); err == nil {
		return errors.New("freeing a view was accepted")
	}
	if other != nil {
		ob, err := other.Alloc(4)
		if err != nil {
			return err
		}
		err = dev.Free(ob)
		if ferr := other.Free(ob); ferr != nil {
			return fmt.Errorf("%s: %w", other.Name(), ferr)
		}
		if err == nil {
			return fmt.Errorf("freeing a buffer of %s was accepted", other.Name())
		}
	}
	if err := dev.Free(b); err != nil {
		return err
	}
	if err := dev.Free(b); err == nil {
		return errors.New("freeing a buffer twice was accepted")
	}
	if left := dev.MemoryUsed() - before; left != 0 {
		*leaked = math.Abs(float64(left))
		return fmt.Errorf("MemoryUsed is %d bytes off its value before the allocation, after Free", left)
	}
	return nil
}
