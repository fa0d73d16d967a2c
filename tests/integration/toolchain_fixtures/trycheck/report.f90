program report
  use, intrinsic :: iso_c_binding, only : c_long_double
  implicit none
  include 'configured.inc'
  real(c_long_double) :: x
  x = 1
  write(*, '(a,i0)') 'configured ldbl_precision=', configured_ldbl_precision
  write(*, '(a,i0)') 'runtime ldbl_precision=', precision(x)
end program report
