// The cost of one wake-up: a thread that sleeps until the next millisecond and wakes, for N
// seconds, with one of four ways of sleeping; prints its process CPU over wall time and per wake.
// usage: wait-primitives futex|futexabs|nanosleep|timerfd SECONDS [TIMER_SLACK_NS]
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/timerfd.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#include <sys/prctl.h>
static double cpu(void){struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t); return t.tv_sec+t.tv_nsec/1e9;}
static double now(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec/1e9;}
static void add_ns(struct timespec*t,long ns){t->tv_nsec+=ns; while(t->tv_nsec>=1000000000){t->tv_nsec-=1000000000;t->tv_sec++;}}
int main(int argc,char**argv){
  const char*mode=argv[1]; int secs=atoi(argv[2]); long period=1000000;
  if(argc>3) prctl(PR_SET_TIMERSLACK, atol(argv[3]));
  double c0=cpu(), w0=now();
  struct timespec due; clock_gettime(CLOCK_MONOTONIC,&due);
  int n=secs*1000; int fu=0;
  if(!strcmp(mode,"nanosleep")){ for(int i=0;i<n;i++){add_ns(&due,period); clock_nanosleep(CLOCK_MONOTONIC,TIMER_ABSTIME,&due,NULL);} }
  else if(!strcmp(mode,"futex")){ for(int i=0;i<n;i++){add_ns(&due,period); struct timespec nw; clock_gettime(CLOCK_MONOTONIC,&nw);
      long rel=(due.tv_sec-nw.tv_sec)*1000000000L+(due.tv_nsec-nw.tv_nsec); if(rel<=0) continue; struct timespec r={rel/1000000000L, rel%1000000000L};
      syscall(SYS_futex,&fu,FUTEX_WAIT_PRIVATE,0,&r,NULL,0);} }
  else if(!strcmp(mode,"futexabs")){ for(int i=0;i<n;i++){add_ns(&due,period); syscall(SYS_futex,&fu,FUTEX_WAIT_BITSET_PRIVATE,0,&due,NULL,FUTEX_BITSET_MATCH_ANY);} }
  else if(!strcmp(mode,"timerfd")){ int fd=timerfd_create(CLOCK_MONOTONIC,0); struct itimerspec its={{0,period},{0,period}}; timerfd_settime(fd,0,&its,NULL);
      unsigned long long x; for(int i=0;i<n;i++){ read(fd,&x,8);} }
  double c1=cpu(), w1=now();
  printf("%s cores %.4f us_per_wake %.2f\n", mode, (c1-c0)/(w1-w0), (c1-c0)/n*1e6);
}
