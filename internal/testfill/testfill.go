// Package testfill is test-only: it sets every exported field reachable
// from a value to something other than its zero, so a test that sends the
// value through an encoding and back sees any field the encoding drops
// (the worker handover's definitions and provider settings).
package testfill

import (
	"fmt"
	"reflect"
)

// Fill fills v (settable: a pointer's Elem) field by field. Special, when
// it returns true, has set a value of a type with rules of its own (an
// enumeration, a duration that must parse); its path names the field.
func Fill(v reflect.Value, path string, special func(v reflect.Value) bool) error {
	if special != nil && special(v) {
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s-" + path)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Interface:
		v.Set(reflect.ValueOf("any-" + path))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		return Fill(v.Elem(), path, special)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		return Fill(v.Index(0), path+"[0]", special)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		e := reflect.New(v.Type().Elem()).Elem()
		if err := Fill(k, path+".key", special); err != nil {
			return err
		}
		if err := Fill(e, path+".elem", special); err != nil {
			return err
		}
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				if err := Fill(v.Field(i), path+"."+f.Name, special); err != nil {
					return err
				}
			}
		}
	default:
		return fmt.Errorf("%s: cannot fill a %s", path, v.Type())
	}
	return nil
}
